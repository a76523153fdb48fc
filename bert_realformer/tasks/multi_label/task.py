"""Multi-label classification as a fine-tuning task: `BertClassifier`'s C logits read through a
sigmoid each, trained with binary cross-entropy (`losses`), evaluated at decision thresholds
(`metrics`: a fixed one, or each label's tuned on the dev set), `test_results.tsv` one row of
the C label probabilities per test example, and a SavedModel that returns them with the labels
they pass (`probabilities`, `predicted`).

The thresholds a training run settled on are recorded in OUTPUT_DIR/training_options.json
(`classifier_input.thresholds`), so a later run on the directory that does not train evaluates,
predicts and exports with them, and a conversion serves them, unless it is given a threshold or
tunes its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import modeling
from bert_realformer import console, storage
from bert_realformer.errors import InputError
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData, TaskOptions
from bert_realformer.tasks.classification.task import (
    LABEL_LIST,
    predict_windows,
    record_label_list,
    settle_label_list,
    training_task,
)
from bert_realformer.tasks.multi_label.losses import MultiLabelLoss
from bert_realformer.tasks.multi_label.metrics import REPORTED, multi_label_results, sigmoid, tuned_thresholds
from bert_realformer.tasks.multi_label.reading import MultiLabelProcessor
from bert_realformer.tasks.outputs import write_test_results
from bert_realformer.tasks.registry import register
from bert_realformer.training import recorded_options


@dataclasses.dataclass(frozen=True)
class MultiLabelOptions:
    """The generic files' directory and columns (`data_options`: `data_format`, `text_a_column`,
    `text_b_column`, `label_column`), the labels (`label_file`, else the training file's) and
    their `label_separator`; the decision `threshold` (None: the thresholds recorded by the run
    that trained the directory where this run does not train, else 0.5), or with
    `tune_thresholds` each label's chosen on the dev set; how a text too long is cut, batches by
    length, R-Drop."""
    data_dir: str
    data_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    label_file: str | None = None
    label_separator: str = ","
    threshold: float | None = None
    tune_thresholds: bool = False
    truncation: str = "head"
    group_by_length: bool = False
    rdrop_alpha: float = 0.0


@register("multi_label")
class MultiLabelTask(FinetuningTask):
    """Each example has any number of the labels; judged by micro-averaged F1."""

    metrics = REPORTED

    def __init__(self, options: TaskOptions, multi_label: MultiLabelOptions):
        super().__init__(options)
        self.multi_label = multi_label
        self.label_list: list[str] = []
        self.evaluated_thresholds = None  # the last evaluation's thresholds
        self.thresholds = None            # what prediction and export use (`settle`)
        self.recorded_thresholds = None   # the training run's, where this run reads a trained directory

    def read(self, splits: Sequence[str]) -> TaskData:
        """The examples; the labels settled with OUTPUT_DIR/label_list.txt (`settle_label_list`)."""
        m, output_dir = self.multi_label, self.options.output_dir
        recorded = os.path.join(output_dir, LABEL_LIST)
        label_file = m.label_file or (recorded if storage.isfile(recorded) else None)
        options = {k: v for k, v in m.data_options.items() if v is not None}
        processor = MultiLabelProcessor(m.label_separator, label_file=label_file, **options)
        self.label_list = settle_label_list(processor.set_labels_from(m.data_dir), output_dir, record=False)
        read = {"train": processor.get_train_examples, "dev": processor.get_dev_examples,
                "test": processor.get_test_examples}
        data = TaskData(**{split: read[split](m.data_dir) for split in splits})
        record_label_list(self.label_list, output_dir)  # (once the data is read: see ClassificationTask.read)
        # (used where nothing else decides: no training, no threshold asked, none tuned on a dev set)
        if "train" not in splits and m.threshold is None and not (m.tune_thresholds and "dev" in splits):
            self.recorded_thresholds = recorded_thresholds(output_dir, self.label_list)
        if self.recorded_thresholds:
            console.say("thresholds: the training run's, recorded in "
                        + os.path.join(output_dir, recorded_options.FILE_NAME) + ": "
                        + ", ".join(f"{label} {t:g}" for label, t in zip(self.label_list, self.recorded_thresholds)))
        return data

    @property
    def label_names(self):
        return self.label_list

    def build_model(self, config):
        return modeling.BertClassifier(config, num_labels=len(self.label_list))

    def training_task(self, examples, tokenizer, schedule):
        m = self.multi_label
        if m.rdrop_alpha:
            console.say(f"R-Drop: two dropout passes per example, their divergence weighted {m.rdrop_alpha:g}")
        return training_task(
            examples, tokenizer, self.options.max_seq_length, schedule, label_list=self.label_list,
            features_path=os.path.join(self.options.output_dir, "train.tf_record"), group_by_length=m.group_by_length,
            truncation=m.truncation, loss=MultiLabelLoss(m.rdrop_alpha), multi_label=True)

    def predict(self, driver, tokenizer, examples, split) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, C], 0/1 labels [N, C]) of `examples`, in order."""
        options = self.options
        name = "eval.tf_record" if split == "dev" else "predict.tf_record"
        windows = predict_windows(driver, examples, self.label_list, tokenizer, os.path.join(options.output_dir, name),
                                  options.batch_size(split), options.max_seq_length, None, options.dynamic_padding,
                                  self.multi_label.truncation, multi_label=True)
        logits = np.zeros((len(examples), windows.logits.shape[1]), np.float32)
        logits[windows.example_index] = windows.logits
        return logits, windows.labels

    def evaluate(self, examples, predictions, step, selection):
        logits, labels = predictions
        m = self.multi_label
        thresholds = tuned_thresholds(logits, labels) if m.tune_thresholds else self.untuned_thresholds()
        self.evaluated_thresholds = thresholds
        return Evaluation(multi_label_results(logits, labels, self.label_list, thresholds, step), None)

    def untuned_thresholds(self) -> list[float]:
        """One threshold per label where none is tuned: the asked one, else the training run's
        recorded ones (a run reading a trained directory), else 0.5."""
        if self.multi_label.threshold is not None:
            return [self.multi_label.threshold] * len(self.label_list)
        return self.recorded_thresholds or [0.5] * len(self.label_list)

    def settle(self, driver):
        """The thresholds prediction and export use: the final evaluation's, else (no dev set
        evaluated) the untuned ones, the training run's recorded ones among them."""
        self.thresholds = self.evaluated_thresholds or self.untuned_thresholds()

    def recorded_options(self):
        """How the model reads its input and decides, for a later conversion to a SavedModel."""
        m = self.multi_label
        return {"classifier_input": {"max_seq_length": self.options.max_seq_length, "truncation": m.truncation,
                                     "multi_label": True,
                                     "thresholds": self.thresholds or self.untuned_thresholds()}}

    def write_predictions(self, examples, predictions, split):
        if split != "test":
            return []
        return write_test_results(sigmoid(predictions[0]), self.options.output_dir)

    def export(self, driver, tokenizer, export_dir):
        from bert_realformer.inference.export import ServedText, export_classifier
        text = ServedText(tokenizer.vocab_file, tokenizer.do_lower_case, self.options.max_seq_length,
                          self.multi_label.truncation)
        return export_classifier(driver.model, text, self.label_list, export_dir, self.thresholds,
                                 driver.predictor.engine)


def recorded_thresholds(output_dir: str, label_list: Sequence[str]) -> list[float] | None:
    """The thresholds recorded in OUTPUT_DIR/training_options.json by the run that trained the
    directory, one per label of `label_list` (None: none recorded); a value that is not one number
    from 0 to 1 per label is an `InputError` naming the file."""
    recorded = recorded_options.read(output_dir).get("classifier_input", {}).get("thresholds")
    if recorded is None:
        return None
    valid = (isinstance(recorded, list) and len(recorded) == len(label_list)
             and all(isinstance(t, (int, float)) and not isinstance(t, bool) and 0.0 <= t <= 1.0 for t in recorded))
    if not valid:
        path = os.path.join(output_dir, recorded_options.FILE_NAME)
        raise InputError(f"{path}: classifier_input.thresholds holds {json.dumps(recorded)[:200]}; expected "
                         f"{len(label_list)} numbers from 0 to 1, one per label of {LABEL_LIST} "
                         "(or give multi_label_threshold or tune_thresholds)",
                         options=("multi_label_threshold", "tune_thresholds"))
    return [float(t) for t in recorded]
