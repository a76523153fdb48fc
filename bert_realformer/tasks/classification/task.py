"""Sentence (pair) classification and STS-B regression as a task for the training driver:
the loss, the training task over cached features, predictions, and the eval_results.txt and
test_results.tsv the original writes.

Long documents (`doc_stride`): prediction gives every window's logits (`predict_windows`),
combined into one row per document by a pooling (`windows`: max, mean, the first window, or
the dev set's choice among them). Training either pools a document's windows before the loss
(`window_training="pooled"`: one loss per document, so a window that holds none of the evidence
is not taught its document's label) or trains every window alone with its document's label
(`"separate"`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer import console, storage
from bert_realformer.checkpoints.formats import LABELS_FILE, labels_text, read_labels
from bert_realformer.errors import InputError
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData, TaskOptions
from bert_realformer.finetuning.schedule import Schedule, example_totals, loss_share
from bert_realformer.tasks.classification import metrics
from bert_realformer.tasks.classification.features import (
    RecordLayout,
    cached_features,
    document_dataset,
    features_key,
    prediction_dataset,
    training_dataset,
)
from bert_realformer.tasks.classification.losses import (
    ClassifierLoss,
    balanced_class_weights,
    read_class_weights,
)
from bert_realformer.tasks.classification.metrics import evaluation_results, main_metric
from bert_realformer.tasks.classification.processors import get_processor
from bert_realformer.tasks.classification.windows import (
    WindowOutputs,
    choose_pooling,
    pool_windows,
    recorded_choice,
    served_reading,
    training_pooling,
)
from bert_realformer.tasks.feature_cache import keyed_path, record_count
from bert_realformer.tasks.outputs import write_test_results
from bert_realformer.tasks.registry import register
from bert_realformer.training.driver import TrainingTask

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # annotations only
    from bert_realformer.tasks.classification.reading import InputExample
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer


def _loss_sum(forward, labels, loss):
    """The summed loss of `forward()`'s outputs [B, C] (float32) against labels [B]: `loss`'s
    weighted sum (`losses.ClassifierLoss`; with R-Drop over a second pass drawing its own
    dropout), or with `loss` None (regression) the squared error of the score."""
    outputs = forward()
    if loss is None:
        return tf.reduce_sum(tf.square(outputs[:, 0] - tf.cast(labels, tf.float32)))
    if not loss.rdrop_alpha:
        return loss.weighted_sum(outputs, labels)
    with modeling.second_pass():
        again = forward()
    return loss.rdrop_weighted_sum(outputs, again, labels)


def classifier_loss_fn(loss: ClassifierLoss | None):
    """This replica's share of the step's loss: `loss` (`losses.ClassifierLoss`; the original's
    is the mean cross-entropy), or with `loss` None (regression) the mean squared error."""

    def loss_fn(model, features, step, totals):
        def logits():
            return tf.cast(model(features, training=True), tf.float32)
        return loss_share(_loss_sum(logits, features["label_ids"], loss), totals["examples"])

    return loss_fn


WINDOW_TRAININGS = ("pooled", "separate")


def document_loss_fn(loss: ClassifierLoss | None, pooling: str):
    """The loss of whole documents: a document's windows [W, S] run through the model, their
    outputs pooled (`pool_windows`) and the pooled prediction scored against the document's
    label, as `classifier_loss_fn` scores one sequence; this replica's share of the step's loss."""

    def loss_fn(model, features, step, totals):
        shape = tf.shape(features["input_ids"])                                  # [B, W, S]
        windows = {name: tf.reshape(features[name], tf.concat([[-1], tf.shape(features[name])[2:]], 0))
                   for name in ("input_ids", "input_mask", "segment_ids", modeling.WORD_EMBEDDING_DELTA)
                   if name in features}                                          # [B * W, S (, H)]

        def pooled():
            logits = tf.reshape(model(windows, training=True), [shape[0], shape[1], -1])  # [B, W, C]
            return pool_windows(tf.cast(logits, tf.float32), features["window_mask"], pooling)  # [B, C]
        return loss_share(_loss_sum(pooled, features["label_ids"], loss), totals["examples"])

    return loss_fn


def training_task(examples: list[InputExample], tokenizer: FullTokenizer, max_seq_length: int,
                  schedule: Schedule, *, label_list: list[str] | None, features_path: str,
                  doc_stride: int | None = None, group_by_length: bool = False, truncation: str = "head",
                  window_training: str = "separate", window_pooling: str = "mean",
                  max_windows_per_document: int = 8, loss: ClassifierLoss | None = None,
                  multi_label: bool = False) -> TrainingTask:
    """The `TrainingTask` over the examples' features, cached in `features_path` (re-used when
    the same), each epoch in a new order (`Schedule.batches`). Without `doc_stride`, one record
    per example, cut as `truncation` says. With it: `window_training="separate"` trains every
    window alone (an epoch is every window once); `"pooled"` trains whole documents (an epoch
    is every document once; a batch of B documents runs up to B * `max_windows_per_document`
    windows), their windows pooled by `window_pooling` before the loss (`document_loss_fn`).
    `label_list` None: regression; `loss`: a classifier's loss (default: the original's);
    `multi_label`: the examples' labels are tuples (`multi_label.task`), their loss `loss`."""
    regression = label_list is None
    loss = None if regression else loss or ClassifierLoss()
    totals_fn = example_totals if regression else loss.totals
    pooled = bool(doc_stride) and window_training == "pooled"
    window_pooling = training_pooling(window_pooling)
    reused = cached_features(examples, label_list, max_seq_length, tokenizer, features_path, doc_stride,
                             per_document=pooled, truncation=truncation)
    count = record_count(features_path)
    done = f"{'re-used' if reused else 'wrote'} {features_path}"
    if pooled:
        return schedule.training_task(
            count, document_loss_fn(loss, window_pooling), totals_fn,
            lambda start: document_dataset(features_path, schedule.batch_size, max_seq_length,
                                           max_windows_per_document, regression, schedule.seed, start, count,
                                           schedule.shuffle_buffer_size),
            summary=f"{done} ({len(examples)} documents, their windows pooled ({window_pooling}) before the loss)",
            features_path=features_path)
    windows = f", {count} windows" if doc_stride else ""
    layout = RecordLayout(max_seq_length, regression, len(label_list) if multi_label else None)
    return schedule.training_task(
        count, classifier_loss_fn(loss), totals_fn,
        lambda start: training_dataset(features_path, layout, schedule, start, count, group_by_length),
        summary=f"{done} ({len(examples)} examples{windows})", features_path=features_path)


def predict_windows(driver: Driver, examples: list[InputExample], label_list: list[str] | None,
                    tokenizer: FullTokenizer, features_path: str, batch_size: int, max_seq_length: int,
                    doc_stride: int | None = None, dynamic_padding: bool = True,
                    truncation: str = "head", multi_label: bool = False) -> WindowOutputs:
    """The logits of every window of `examples` (one per example without `doc_stride`, cut as
    `truncation` says) with the driver's model, features cached at `features_path` with a
    digest of what they hold before its extension (`feature_cache.keyed_path`). With
    `dynamic_padding` (the default) the sequences are run in order of length, each batch cut to
    its longest; False: in file order, every batch at `max_seq_length`, as the original."""
    regression = label_list is None
    # (named by its key: evaluation and prediction runs do not claim the directory, and two of them
    # with other settings must not read each other's features)
    key = features_key(examples, label_list, max_seq_length, tokenizer, doc_stride, dynamic_padding,
                       truncation=truncation)
    features_path = keyed_path(features_path, key)
    cached_features(examples, label_list, max_seq_length, tokenizer, features_path, doc_stride,
                    sort_by_length=dynamic_padding, truncation=truncation, key=key)
    layout = RecordLayout(max_seq_length, regression, len(label_list) if multi_label else None)
    result = driver.predict(prediction_dataset(features_path, layout, batch_size,
                                               driver.trim if dynamic_padding else None),
                            _prediction_outputs(regression))
    labels = np.zeros((len(examples), *result["labels"].shape[1:]), result["labels"].dtype)
    labels[result["example_index"]] = result["labels"]
    return WindowOutputs(result["outputs"], result["example_index"], result["window_index"], labels, regression)


def predict(driver: Driver, examples: list[InputExample], label_list: list[str] | None, tokenizer: FullTokenizer,
            features_path: str, batch_size: int, max_seq_length: int, doc_stride: int | None = None,
            window_pooling: str = "mean", dynamic_padding: bool = True,
            truncation: str = "head") -> tuple[np.ndarray, np.ndarray]:
    """(probabilities [N, C], or scores [N, 1] for regression; labels [N]) for `examples`, in
    order: `predict_windows`' windows combined into one row per example by `window_pooling`
    (max, mean or first: `windows.POOLINGS`)."""
    windows = predict_windows(driver, examples, label_list, tokenizer, features_path, batch_size, max_seq_length,
                              doc_stride, dynamic_padding, truncation)
    return windows.combined(window_pooling), windows.labels


@functools.cache
def _prediction_outputs(regression):
    """The per-batch outputs of `predict_windows`: logits (scores for regression) with each
    window's example, place in it and label (one function per kind, so a driver re-uses its trace)."""

    def outputs(model, features):
        return {"outputs": tf.cast(model(features, training=False), tf.float32), "labels": features["label_ids"],
                "example_index": features["example_index"], "window_index": features["window_index"]}
    return outputs


LABEL_LIST = LABELS_FILE  # OUTPUT_DIR/label_list.txt: the column order of test_results.tsv


def recorded_label_list(output_dir: str) -> list[str] | None:
    """The labels a run recorded in OUTPUT_DIR/label_list.txt (one per line), or None."""
    path = os.path.join(output_dir, LABEL_LIST)
    return read_labels(path) if storage.isfile(path) else None


def settle_label_list(label_list: list[str], output_dir: str, record: bool = True) -> list[str]:
    """The run's label list, written to OUTPUT_DIR/label_list.txt (with `record`; else
    `record_label_list` writes it once the data has been read). Where the directory already
    records one (a run that trained there), its order wins: it is the order of the classifier's
    outputs. Other labels than the recorded ones are an `InputError`."""
    path = os.path.join(output_dir, LABEL_LIST)
    recorded = recorded_label_list(output_dir)
    if recorded is not None and recorded != label_list:
        if sorted(recorded) != sorted(label_list):
            def shown(labels):
                return ", ".join(labels[:10]) + (" ..." if len(labels) > 10 else "")
            raise InputError(f"the labels of this run ({shown(label_list)}) are not those the model in "
                             f"{output_dir} was trained on ({shown(recorded)}, {path}): another task's "
                             "output directory?")
        logger.info("using the label order recorded in %s", path)
        return recorded
    if recorded is None and record:
        record_label_list(label_list, output_dir)
    return label_list


def record_label_list(label_list: list[str], output_dir: str) -> None:
    """OUTPUT_DIR/label_list.txt, where the directory records none yet."""
    path = os.path.join(output_dir, LABEL_LIST)
    if not storage.isfile(path):
        storage.write_atomic(path, labels_text(label_list))


REPORTED = metrics.REPORTED
SHOWN = ("eval_accuracy", "eval_loss", "macro_f1", "matthews_corrcoef", "f1", "pearson", "spearman")


@dataclasses.dataclass(frozen=True)
class ClassificationOptions:
    """The data (`reading.get_processor`'s task, directory and options; `label_file`: the labels,
    one per line), how long texts are read: cut (`truncation`) or, with `doc_stride`, in
    windows trained as `window_training` and combined by `window_pooling` (`windows`), and the
    training loss (`losses`: cross-entropy or focal, label smoothing, class weights)."""
    task_name: str
    data_dir: str
    data_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    label_file: str | None = None
    doc_stride: int | None = None
    window_pooling: str = "auto"
    window_training: str = "separate"
    max_windows_per_document: int = 8
    truncation: str = "head"
    group_by_length: bool = False
    loss: str = "cross_entropy"              # or "focal" (`losses.ClassifierLoss`)
    focal_gamma: float = 2.0
    label_smoothing: float = 0.0
    class_weights: str | None = None         # "balanced", or a file of LABEL<TAB>WEIGHT lines
    rdrop_alpha: float = 0.0                 # R-Drop: two dropout passes, their divergence weighted by this


@register("classification")
class ClassificationTask(FinetuningTask):
    """Sentence (pair) classification and regression as the original run_classifier.py. Its
    metrics are settled by `read`: the task's main metric (`main_metric`) first."""

    shown = SHOWN

    def __init__(self, options: TaskOptions, classification: ClassificationOptions):
        super().__init__(options)
        self.classification = classification
        self.label_list = None
        self.metrics = REPORTED
        # (without windows every pooling reads the one window a text has)
        self.asked_pooling = classification.window_pooling if classification.doc_stride else "max"
        self.chosen_pooling = None   # the last evaluation's choice
        self.served_pooling = None   # what prediction and export read (`settle`)

    @property
    def regression(self) -> bool:
        return self.label_list is None

    def read(self, splits: Sequence[str]) -> TaskData:
        """The examples; the labels settled with OUTPUT_DIR/label_list.txt (`settle_label_list`)."""
        c, output_dir = self.classification, self.options.output_dir
        recorded = os.path.join(output_dir, LABEL_LIST)
        label_file = c.label_file or (recorded if c.task_name == "generic" and storage.isfile(recorded) else None)
        processor = get_processor(c.task_name, c.data_dir, label_file=label_file, **c.data_options)
        labels = processor.get_labels()
        self.label_list = None if labels is None else settle_label_list(labels, output_dir, record=False)
        self.metrics = (main_metric(c.task_name, self.regression), *REPORTED)
        read = {"train": processor.get_train_examples, "dev": processor.get_dev_examples,
                "test": processor.get_test_examples}
        data = TaskData(**{split: read[split](c.data_dir) for split in splits})
        if self.label_list is not None:  # (data refused: no label list left to misread the next run)
            record_label_list(self.label_list, output_dir)
        return data

    @property
    def num_classes(self):
        return 1 if self.regression else len(self.label_list)

    @property
    def label_names(self):
        return self.label_list

    @property
    def stuck_hint(self):
        c = self.classification
        if c.doc_stride and c.window_training == "pooled":
            return ("--window_training=separate (pooled windows train each document through one pooled logit, "
                    "which can stay at chance where documents have many windows)")
        return None

    @property
    def chance_loss(self):
        if self.regression:
            return None
        c = self.classification
        return ClassifierLoss(c.loss, c.focal_gamma).chance_loss(self.num_classes)

    def build_model(self, config):
        return modeling.BertClassifier(config, num_labels=self.num_classes)

    def training_loss(self, examples) -> ClassifierLoss | None:
        """The loss the options ask for (None for regression, which has one: squared error);
        "balanced" class weights from the labels of the training `examples`."""
        c = self.classification
        if self.regression:
            if c.loss != "cross_entropy" or c.label_smoothing or c.class_weights or c.rdrop_alpha:
                raise InputError(f"{c.task_name} is a regression (one score): focal loss, label smoothing, "
                                 "class weights and R-Drop are for classes")
            return None
        weights = None
        if c.class_weights == "balanced":
            index = {label: i for i, label in enumerate(self.label_list)}
            weights = balanced_class_weights([index[e.label] for e in examples], len(self.label_list))
        elif c.class_weights:
            weights = read_class_weights(c.class_weights, self.label_list)
        if weights is not None:
            console.say("class weights: " + ", ".join(f"{label} {w:.4g}" for label, w in zip(self.label_list, weights)))
        if c.rdrop_alpha:
            console.say(f"R-Drop: two dropout passes per example, their divergence weighted {c.rdrop_alpha:g}")
        return ClassifierLoss(c.loss, c.focal_gamma, c.label_smoothing, weights, c.rdrop_alpha)

    def training_task(self, examples, tokenizer, schedule):
        c = self.classification
        return training_task(
            examples, tokenizer, self.options.max_seq_length, schedule, label_list=self.label_list,
            features_path=os.path.join(self.options.output_dir, "train.tf_record"), doc_stride=c.doc_stride,
            group_by_length=c.group_by_length, truncation=c.truncation, window_training=c.window_training,
            window_pooling=c.window_pooling, max_windows_per_document=c.max_windows_per_document,
            loss=self.training_loss(examples))

    def predict(self, driver, tokenizer, examples, split) -> WindowOutputs:
        c, options = self.classification, self.options
        name = "eval.tf_record" if split == "dev" else "predict.tf_record"
        return predict_windows(driver, examples, self.label_list, tokenizer, os.path.join(options.output_dir, name),
                               options.batch_size(split), options.max_seq_length, c.doc_stride,
                               options.dynamic_padding, c.truncation)

    def evaluate(self, examples, windows, step, selection):
        """The dev set read by the asked pooling, or with `auto` by each and the best kept."""
        reading = choose_pooling(windows, self.asked_pooling, lambda outputs: evaluation_results(
            self.classification.task_name, outputs, windows.labels, self.label_list, step),
            selection.metric, selection.better)
        self.chosen_pooling = reading.pooling
        return Evaluation(reading.result, None, None if self.regression else reading.outputs.argmax(-1))

    def settle(self, driver):
        """The pooling prediction and export read: the final evaluation's choice, else the one
        recorded with the weights (`windows.recorded_choice`)."""
        self.served_pooling = self.chosen_pooling or recorded_choice(
            self.asked_pooling, driver.weights and driver.weights.prefix, driver.write_dir)

    def recorded_options(self):
        """How the model reads its input, for a later conversion to a SavedModel."""
        c = self.classification
        pooling = self.served_pooling if c.doc_stride and self.served_pooling else c.window_pooling
        return {"classifier_input": {"max_seq_length": self.options.max_seq_length, "doc_stride": c.doc_stride,
                                     "window_pooling": pooling, "truncation": c.truncation}}

    def write_predictions(self, examples, windows, split):
        if split != "test":
            return []
        return write_test_results(windows.combined(self.served_pooling), self.options.output_dir)

    def export(self, driver, tokenizer, export_dir):
        from bert_realformer.inference.export import ServedText, export_classifier
        c = self.classification
        doc_stride, pooling, truncation = served_reading(c.doc_stride, self.served_pooling, c.truncation)
        text = ServedText(tokenizer.vocab_file, tokenizer.do_lower_case, self.options.max_seq_length, truncation,
                          doc_stride, pooling)
        return export_classifier(driver.model, text, self.label_list, export_dir, engine=driver.predictor.engine)
