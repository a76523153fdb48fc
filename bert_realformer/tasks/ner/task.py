"""NER as a fine-tuning task: the loss (softmax per token, or a CRF over the sentence), the
training task over windows, decoding, the evaluation, and `NerTask`.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData, TaskOptions
from bert_realformer.finetuning.schedule import Schedule, example_totals, loss_share
from bert_realformer.tasks.ner import reading
from bert_realformer.tasks.ner.features import sentence_tags, sentence_windows
from bert_realformer.tasks.ner.metrics import REPORTED, entity_metrics
from bert_realformer.tasks.registry import register
from bert_realformer.training.driver import TrainingTask
from modeling import crf

if TYPE_CHECKING:  # annotations only
    from bert_realformer.tasks.ner.reading import Sentence
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer

METRICS = ("loss",)
PREDICTION_FILES = types.MappingProxyType({"dev": "eval_predictions.txt", "test": "test_predictions.txt"})


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
    data = tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size)
    if dynamic_padding:
        data = data.map(driver.trim)
    ids = driver.predict(data, tag_decoder(use_crf))["tags"]
    window_tags = [[labels[i] for i in row] for row in np.asarray(ids)]
    return sentence_tags(windows, window_tags, sentences)


@functools.cache
def tag_decoder(use_crf: bool):
    """The prediction step's outputs: each word's tag id {"tags": [B, W]}, the CRF's Viterbi path
    or each word's most likely tag (one function per kind, so a driver re-uses its trace)."""

    def decode(model, features):
        logits = model(features, training=False)
        if use_crf:
            tags = crf.viterbi_decode(logits, features["word_mask"], model.head.transitions)
        else:
            tags = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"tags": tags}

    return decode


def evaluation_results(sentences, predicted, global_step):
    """eval_results.txt entries: entity precision/recall/F1, token accuracy, per type."""
    return {**entity_metrics([s.tags for s in sentences], predicted), "global_step": global_step}


@register("ner")
class NerTask(FinetuningTask):
    """CoNLL-format files in `data_dir` (`task_name`: generic, conll2003, msra, peoples_daily:
    `reading`), a tag per word (softmax, or a CRF with `use_crf`); the predictions are the input
    lines with the predicted tag appended (conlleval's input)."""

    metrics = REPORTED

    def __init__(self, options: TaskOptions, *, data_dir: str, task_name: str = "generic", use_crf: bool = False):
        super().__init__(options)
        self.data_dir = data_dir
        self.task_name = task_name
        self.use_crf = use_crf
        self.labels = None

    def read(self, splits: Sequence[str]) -> TaskData:
        """The CoNLL files (a generic task reads its training file for its tags even when it does
        not train), every tag checked against the task's tags."""
        wanted = {*splits, *(("train",) if self.task_name == "generic" else ())}
        files = {split: reading.read_conll(reading.data_path(self.data_dir, self.task_name, split),
                                           tagged=split != "test") for split in wanted}
        self.labels = reading.labels_for(self.task_name, files.get("train") or files.get("dev") or files["test"])
        role = "the training file" if self.task_name == "generic" else self.task_name
        for conll_file in files.values():
            reading.check_labels(conll_file, self.labels, role)
        return TaskData(**{split: files[split] for split in splits})

    @property
    def label_names(self):
        return self.labels

    def build_model(self, config):
        return modeling.BertTokenClassifier(config, len(self.labels), crf=self.use_crf)

    def training_task(self, conll_file, tokenizer, schedule):
        return training_task(conll_file.sentences, tokenizer, self.options.max_seq_length, schedule,
                             labels=self.labels, use_crf=self.use_crf)

    def predict(self, driver, tokenizer, conll_file, split):
        return predict_tags(driver, conll_file.sentences, tokenizer, self.labels, self.options.max_seq_length,
                            self.options.batch_size(split), self.use_crf, self.options.dynamic_padding)

    def evaluate(self, conll_file, predicted, step, selection):
        tag_ids = [self.labels.index(tag) for sentence in predicted for tag in sentence]
        return Evaluation(evaluation_results(conll_file.sentences, predicted, step), predicted, tag_ids)

    def write_predictions(self, conll_file, predicted, split):
        path = os.path.join(self.options.output_dir, PREDICTION_FILES[split])
        reading.write_predictions(conll_file, predicted, path)
        return [path]
