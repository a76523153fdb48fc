"""NER as a task for the training driver: the loss (softmax per token, or a CRF over the
sentence), the training task over windows, decoding, and the evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from bert_realformer.tasks.ner.features import sentence_tags, sentence_windows
from bert_realformer.tasks.ner.metrics import entity_metrics
from bert_realformer.training.driver import TrainingTask
from bert_realformer.training.padding import trim_to_longest
from bert_realformer.training.per_example import Schedule, example_totals, loss_share
from modeling import crf

if TYPE_CHECKING:  # annotations only
    from bert_realformer.tasks.ner.reading import Sentence
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer

METRICS = ("loss",)


def ner_loss_fn(use_crf):
    """This replica's share of the step's loss: softmax cross-entropy averaged over the step's
    tokens, or the CRF negative log-likelihood averaged over its windows."""

    def loss_fn(model, features, step, totals):
        logits = model(features, training=True)                                   # [B, W, C]
        mask = tf.cast(features["word_mask"], tf.float32)
        if use_crf:
            nll = -crf.log_likelihood(logits, features["label_ids"], mask, model.head.transitions)
            return loss_share(tf.reduce_sum(nll), totals["examples"])
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        nll = -tf.gather(log_probs, features["label_ids"], batch_dims=2)            # [B, W]
        return loss_share(tf.reduce_sum(nll * mask), totals["words"])

    return loss_fn


def ner_totals(features):
    """The examples (windows) and the words of the step: the CRF and the token losses' counts."""
    return {**example_totals(features), "words": tf.reduce_sum(tf.cast(features["word_mask"], tf.float32))}


def training_task(sentences: list[Sentence], tokenizer: FullTokenizer, max_seq_length: int, schedule: Schedule, *,
                  labels: list[str], use_crf: bool) -> TrainingTask:
    """The `TrainingTask` over the sentences' windows: `int(windows / batch size * epochs)`
    steps, in a new order every epoch (`Schedule.batches`)."""
    label_map = {label: i for i, label in enumerate(labels)}
    arrays, windows = sentence_windows(sentences, tokenizer, max_seq_length, label_map)
    return schedule.training_task(
        len(windows), ner_loss_fn(use_crf), ner_totals,
        lambda start: schedule.batches(tf.data.Dataset.from_tensor_slices(arrays), start, len(windows)),
        metric_names=METRICS,
        summary=f"training on {len(sentences)} sentences ({len(windows)} windows), labels: {' '.join(labels)}")


def predict_tags(driver: Driver, sentences: list[Sentence], tokenizer: FullTokenizer, labels: list[str],
                 max_seq_length: int, batch_size: int, use_crf: bool, dynamic_padding: bool = True) -> list[list[str]]:
    """The predicted tag of every token of `sentences`: one list per sentence. Each batch's
    pieces are cut to its longest window (`dynamic_padding`); the word axis keeps its length
    (the CRF's scan needs it static; the words' positions point into the cut pieces)."""
    arrays, windows = sentence_windows(sentences, tokenizer, max_seq_length)

    def decode(model, features):
        logits = model(features, training=False)
        if use_crf:
            tags = crf.viterbi_decode(logits, features["word_mask"], model.head.transitions)
        else:
            tags = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"tags": tags}

    data = tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size)
    if dynamic_padding:
        data = data.map(trim_to_longest)
    ids = driver.predict(data, decode)["tags"]
    window_tags = [[labels[i] for i in row] for row in np.asarray(ids)]
    return sentence_tags(windows, window_tags, sentences)


def evaluation_results(sentences, predicted, global_step):
    """eval_results.txt entries: entity precision/recall/F1, token accuracy, per type."""
    return {**entity_metrics([s.tags for s in sentences], predicted), "global_step": global_step}
