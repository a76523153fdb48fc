"""MLM + NSP (or MLM-only) pretraining as a task for the training driver, and the original's
evaluation.

    task = pretraining_task(files, batch_size=32, max_seq_length=128, max_predictions_per_seq=20,
                            learning_rate=1e-4, num_train_steps=10000, num_warmup_steps=1000)
    step = driver.train(task)
    result = evaluate(driver, files, batch_size=8, max_seq_length=128,
                      max_predictions_per_seq=20, max_eval_steps=100, step=step)

`layout` says which records the files hold (`input_pipeline.check_records`); unmasked ones
are masked as read with `masking` (`pretraining.dynamic_masking`). Whether NSP is trained and
evaluated is the model's (`BertPretrainer(next_sentence=...)`).
"""

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.pretraining import pld
from bert_realformer.pretraining.input_pipeline import STATIC, make_dataset
from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss
from bert_realformer.training.driver import TrainingTask

METRICS = ("loss", "masked_lm_loss", "next_sentence_loss")
MLM_ONLY_METRICS = ("loss", "masked_lm_loss")


def pretraining_task(files, batch_size, max_seq_length, max_predictions_per_seq, learning_rate,
                     num_train_steps, num_warmup_steps, seed=12345, pld_options=None, next_sentence=True,
                     layout=STATIC, masking=None):
    """The `TrainingTask`. `pld_options`: None, or (theta_bar, gamma) for Progressive Layer
    Dropping on the optimizer step. `next_sentence`: whether the model has the NSP head."""

    def loss_fn(model, features, step, totals):
        keep = None
        if pld_options is not None:
            theta_bar, gamma = pld_options
            keep = pld.keep_probabilities(step, model.config.num_hidden_layers, theta_bar, gamma)
        outputs = model(features, training=True, layer_keep_probs=keep)
        return replica_pretraining_loss(outputs, features, totals)

    def dataset_fn(start):
        return make_dataset(files, batch_size, max_seq_length, max_predictions_per_seq, True,
                            seed=seed, start_batch=start, layout=layout, masking=masking)

    return TrainingTask(loss_fn=loss_fn, totals_fn=pretraining_totals, dataset_fn=dataset_fn,
                        batch_size=batch_size, learning_rate=learning_rate,
                        num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
                        metric_names=METRICS if next_sentence else MLM_ONLY_METRICS, input_files=files,
                        input_option="input_file")


def _eval_outputs(model, features):
    """Per-example values of one batch: MLM losses and predictions [B, P], NSP [B] (with
    the NSP head)."""
    outputs = model(features, training=False)
    losses = modeling.pretraining_losses(outputs, features)
    values = {"mlm_loss": losses["masked_lm_example_loss"],
              "mlm_pred": tf.argmax(outputs["masked_lm_log_probs"], axis=-1, output_type=tf.int32),
              "mlm_ids": features["masked_lm_ids"],
              "mlm_weights": tf.cast(features["masked_lm_weights"], tf.float32)}
    if "next_sentence_log_probs" in outputs:
        values.update(nsp_loss=losses["next_sentence_example_loss"],
                      nsp_pred=tf.argmax(outputs["next_sentence_log_probs"], axis=-1, output_type=tf.int32),
                      nsp_labels=tf.reshape(features["next_sentence_labels"], [-1]))
    return values


def evaluate(driver, files, batch_size, max_seq_length, max_predictions_per_seq, max_eval_steps, step,
             layout=None, masking=None):
    """The original's eval metrics over the first `max_eval_steps` batches of `files` (in
    order): `masked_lm_accuracy`, `masked_lm_loss` (weighted means), with the NSP head
    `next_sentence_accuracy` and `next_sentence_loss`, `loss` (their sum) and `global_step`
    (`step`: that of the weights used). Unmasked records get the fixed evaluation masks of
    `masking`."""
    dataset = make_dataset(files, batch_size, max_seq_length, max_predictions_per_seq, False,
                           layout=layout, masking=masking)
    out = driver.predict(dataset.take(max_eval_steps), _eval_outputs)
    weights = out["mlm_weights"]
    weight_sum = max(float(np.sum(weights)), 1e-12)
    result = {"masked_lm_accuracy": float(np.sum((out["mlm_pred"] == out["mlm_ids"]) * weights)) / weight_sum,
              "masked_lm_loss": float(np.sum(out["mlm_loss"] * weights)) / weight_sum}
    result["loss"] = result["masked_lm_loss"]
    if "nsp_labels" in out:
        examples = max(len(out["nsp_labels"]), 1)
        result["next_sentence_accuracy"] = float(np.sum(out["nsp_pred"] == out["nsp_labels"])) / examples
        result["next_sentence_loss"] = float(np.sum(out["nsp_loss"])) / examples
        result["loss"] += result["next_sentence_loss"]
    result["global_step"] = step
    return result
