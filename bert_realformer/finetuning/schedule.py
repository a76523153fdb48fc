"""The pieces every fine-tuning task shares: a loss averaged over the step's examples, the
original's step count, and the training input order.

The training order: every epoch a new permutation of the whole training set (a function of the
seed and the epoch, so a resumed run continues it exactly). The original fine-tuning scripts
shuffled through a buffer of 100 examples, which leaves a file sorted by label (as THUCNews
ships) sorted: a run then sees one class for hundreds of steps and learns nothing. That order is
one argument away (`shuffle_buffer_size=100`, the scripts' `--shuffle_buffer_size=100`); the
permutation holds the serialized examples in memory (about the size of the features file).

A task states only what is its own (its model call, per-example loss, features); the
`Schedule` (the same flags in every fine-tuning script) makes the rest:

    def loss_fn(model, features, step, totals):
        per_example = ...                                   # [B] this replica's examples
        return loss_share(tf.reduce_sum(per_example), totals["examples"])

    schedule.training_task(len(examples), loss_fn, example_totals,
                           lambda start: schedule.batches(data, start, len(examples)))
"""

import dataclasses
from collections.abc import Callable, Sequence

import tensorflow as tf

from bert_realformer.inference.padding import trim_to_longest
from bert_realformer.training.driver import TrainingTask
from bert_realformer.training.trainer import LossFn, TotalsFn

ORIGINAL_SHUFFLE_BUFFER = 100  # the original fine-tuning scripts' `d.shuffle(buffer_size=100)`


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


GROUPED_BATCHES = 50  # group_by_length: batches made at once from examples sorted by length


def training_batches(data: tf.data.Dataset, batch_size: int, seed: int | None, start_batch: int = 0,
                     num_examples: int | None = None, shuffle_buffer_size: int = 0, group_by_length: bool = False):
    """The `num_examples` examples of `data`, in a new permutation every epoch (a function of the
    seed and the epoch), repeated, from batch `start_batch` on, in batches of `batch_size`
    (remainder dropped). `shuffle_buffer_size` > 0: the original's order instead, the repeated
    examples shuffled through a buffer of that size (100 in the original).

    `group_by_length` (parsed examples with `input_mask`): every `GROUPED_BATCHES` batches' worth
    of examples in that order are sorted by length and cut into batches, which are then taken in
    a random order (a function of the seed and the group), each cut to its longest sequence
    (`padding.trim_to_longest`)."""
    data = training_order(data, seed, num_examples, shuffle_buffer_size)
    if group_by_length:
        return _grouped_by_length(data, batch_size, seed or 0).skip(start_batch)
    return data.skip(start_batch * batch_size).batch(batch_size, drop_remainder=True)


def training_order(data: tf.data.Dataset, seed: int | None, num_examples: int | None = None,
                   shuffle_buffer_size: int = 0) -> tf.data.Dataset:
    """The `num_examples` examples of `data` repeated forever, each epoch a new permutation (a
    function of the seed and the epoch); `shuffle_buffer_size` > 0: the original's shuffle
    through a buffer of that size instead."""
    if shuffle_buffer_size:
        return data.repeat().shuffle(shuffle_buffer_size, seed=seed)
    if not num_examples:
        raise ValueError("a permutation of the whole training set needs num_examples")
    return data.shuffle(num_examples, seed=seed, reshuffle_each_iteration=True).repeat()


def _grouped_by_length(data, batch_size, seed):
    group = batch_size * GROUPED_BATCHES

    def batches_of(index, examples):
        lengths = tf.reduce_sum(tf.cast(examples["input_mask"], tf.int32), axis=-1)
        by_length = tf.argsort(lengths, stable=True)
        order = tf.random.experimental.stateless_shuffle(tf.range(GROUPED_BATCHES), seed=tf.stack(
            [tf.constant(seed, tf.int64), index]))
        rows = tf.reshape(tf.gather(tf.reshape(by_length, [GROUPED_BATCHES, batch_size]), order), [-1])
        sorted_examples = {k: tf.reshape(tf.gather(v, rows), tf.concat([[GROUPED_BATCHES, batch_size],
                                                                          tf.shape(v)[1:]], 0))
                           for k, v in examples.items()}
        return tf.data.Dataset.from_tensor_slices(sorted_examples)

    batches = data.batch(group, drop_remainder=True).enumerate().flat_map(batches_of)
    return batches.map(trim_to_longest)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How a fine-tuning run trains, the same for every task (the scripts' shared flags):
    `num_train_epochs` over the training sequences in batches of `batch_size`, each update
    `accumulation_steps` such batches, the learning rate warmed up over `warmup_proportion` of
    the steps; the order from `seed`, a permutation per epoch (`shuffle_buffer_size` > 0: the
    original's buffer instead)."""
    batch_size: int
    learning_rate: float
    num_train_epochs: float
    warmup_proportion: float = 0.1
    accumulation_steps: int = 1
    seed: int = 12345
    shuffle_buffer_size: int = 0

    def training_task(self, num_examples: int, loss_fn: LossFn, totals_fn: TotalsFn,
                      dataset_fn: Callable[[int], tf.data.Dataset], metric_names: Sequence[str] = ("loss",),
                      summary: str = "", features_path: str | None = None) -> TrainingTask:
        """The `TrainingTask` of `num_examples` training sequences: the original's step count
        (`num_train_steps`), warmup the schedule's share of it. `features_path`: the feature
        cache `dataset_fn` reads (a record damaged while training names it)."""
        steps = num_train_steps(num_examples, self.batch_size, self.num_train_epochs, self.accumulation_steps)
        return TrainingTask(loss_fn=loss_fn, totals_fn=totals_fn, dataset_fn=dataset_fn, batch_size=self.batch_size,
                            learning_rate=self.learning_rate, num_train_steps=steps,
                            num_warmup_steps=int(steps * self.warmup_proportion), metric_names=metric_names,
                            summary=summary, input_files=[features_path] if features_path else (),
                            input_name="the training feature cache",
                            input_advice="run again: a damaged cache is written anew")

    def batches(self, data: tf.data.Dataset, start_batch: int, num_examples: int,
                group_by_length: bool = False) -> tf.data.Dataset:
        """`training_batches` of `data` in this schedule's order and batch size."""
        return training_batches(data, self.batch_size, self.seed, start_batch, num_examples, self.shuffle_buffer_size,
                                group_by_length)
