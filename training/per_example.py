"""The pieces every fine-tuning task shares: a loss averaged over the step's examples, the
original's step count, and the training input order.

A task states only what is its own (its model call, per-example loss, features):

    def loss_fn(model, features, step, totals):
        per_example = ...                                   # [B] this replica's examples
        return loss_share(tf.reduce_sum(per_example), totals["examples"])

    TrainingTask(loss_fn=loss_fn, totals_fn=example_totals,
                 dataset_fn=lambda start: training_batches(data, batch_size, seed, start), ...)
"""

import tensorflow as tf

SHUFFLE_BUFFER = 100  # the original fine-tuning scripts' `d.shuffle(buffer_size=100)`


def num_train_steps(num_examples: int, batch_size: int, num_train_epochs: float,
                    accumulation_steps: int = 1) -> int:
    """The original's `int(examples / batch size * epochs)`, the batch counting every
    accumulated micro-batch; at least 1."""
    return max(1, int(num_examples / batch_size / accumulation_steps * num_train_epochs))


def example_totals(features: dict) -> dict:
    """The step-wide total the shares are normalised by: the number of examples."""
    return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def loss_share(this_replicas_sum, step_total) -> tuple:
    """(share, {"loss": share}): this replica's and micro-batch's part of the step's mean loss
    (`this_replicas_sum` / `step_total`, the step-wide count from the totals)."""
    share = this_replicas_sum / step_total
    return share, {"loss": share}


def training_batches(data: tf.data.Dataset, batch_size: int, seed: int | None, start_batch: int = 0):
    """Examples repeated, shuffled with the original's buffer of 100 (a function of the seed),
    from batch `start_batch` on, in batches of `batch_size` (remainder dropped)."""
    data = data.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
    return data.skip(start_batch * batch_size).batch(batch_size, drop_remainder=True)
