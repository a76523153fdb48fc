"""SQuAD as a fine-tuning task: the span loss, the original's training set-up (examples
shuffled with `random.Random(12345)`, steps counted from examples), predictions written as the
original's predictions.json / nbest_predictions.json / null_odds.json, and `SquadTask`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer import console, storage
from bert_realformer.errors import InputError
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData, TaskOptions
from bert_realformer.finetuning.schedule import Schedule, example_totals, loss_share, training_batches
from bert_realformer.inference.padding import pad_to
from bert_realformer.storage import file_digest
from bert_realformer.tasks.feature_cache import cached_records, digest
from bert_realformer.tasks.registry import register
from bert_realformer.tasks.squad.answers import RawResult, compute_predictions
from bert_realformer.tasks.squad.features import convert_examples_to_features, iter_features
from bert_realformer.tasks.squad.metrics import reported_metrics
from bert_realformer.tasks.squad.reading import read_squad_examples
from bert_realformer.text_files import read_text
from bert_realformer.tfrecords import encode_example, int64_feature
from bert_realformer.training.driver import TrainingTask

PADDING_LOGIT = -10000.0  # start/end logits past a batch's longest window (dynamic padding)

if TYPE_CHECKING:  # annotations only
    from bert_realformer.tasks.squad.reading import SquadExample
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer

EXAMPLE_SHUFFLE_SEED = 12345  # the original pre-shuffles the training examples with this seed


def span_loss_fn(model, features, step, totals):
    """This replica's share of the batch's mean of (start NLL + end NLL) / 2."""
    start_logits, end_logits = model(features, training=True)

    def nll(logits, positions):
        return -tf.gather(tf.nn.log_softmax(logits, -1), positions, batch_dims=1)

    per_example = (nll(start_logits, features["start_positions"])
                   + nll(end_logits, features["end_positions"])) / 2.0
    return loss_share(tf.reduce_sum(per_example), totals["examples"])


def feature_arrays(features, is_training):
    """InputFeatures -> {name: int32 array [N, ...]} (with the answer positions for training)."""
    out = {"input_ids": np.array([f.input_ids for f in features], "int32"),
           "input_mask": np.array([f.input_mask for f in features], "int32"),
           "segment_ids": np.array([f.segment_ids for f in features], "int32")}
    if is_training:
        out["start_positions"] = np.array([f.start_position for f in features], "int32")
        out["end_positions"] = np.array([f.end_position for f in features], "int32")
    return out


def shuffled_training_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length):
    """The training windows of the examples taken in the order `random.Random(12345)`
    shuffles them, as the original pre-shuffles its training examples (a generator)."""
    examples = list(examples)
    random.Random(EXAMPLE_SHUFFLE_SEED).shuffle(examples)
    return iter_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, True)


TRAINING_SPEC = ("input_ids", "input_mask", "segment_ids", "start_positions", "end_positions")


def write_training_features(examples: list[SquadExample], tokenizer: FullTokenizer, max_seq_length: int,
                            doc_stride: int, max_query_length: int, path: str) -> tuple[bool, int]:
    """Streams the training windows (`shuffled_training_features`) to TFRecord `path`, one at a
    time, as the original writes train.tf_record; re-uses the file while the examples, vocabulary,
    casing and window flags are the same. Returns (re-used, number of features)."""
    key = {"examples": digest([e.qas_id, e.question_text, e.doc_tokens, e.orig_answer_text, e.start_position,
                               e.end_position, e.is_impossible] for e in examples),
           "vocab": file_digest(tokenizer.vocab_file), "do_lower_case": tokenizer.do_lower_case,
           "windows": [max_seq_length, doc_stride, max_query_length], "shuffle_seed": EXAMPLE_SHUFFLE_SEED}

    def records():
        for f in shuffled_training_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length):
            yield encode_example({"input_ids": int64_feature(f.input_ids), "input_mask": int64_feature(f.input_mask),
                                  "segment_ids": int64_feature(f.segment_ids),
                                  "start_positions": int64_feature([f.start_position]),
                                  "end_positions": int64_feature([f.end_position])})

    return cached_records(path, key, records)


def training_dataset(path: str, max_seq_length: int, batch_size: int, seed: int,
                     start_batch: int = 0, num_features: int | None = None,
                     shuffle_buffer_size: int = 0) -> tf.data.Dataset:
    """The training input: the `num_features` records in a new order every epoch (or the
    original's shuffle buffer, `shuffle_buffer_size`), repeated, batched without remainder; from
    batch `start_batch` of the seed's sequence on. int32 features."""
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length, "segment_ids": max_seq_length,
               "start_positions": 1, "end_positions": 1}
    spec = {name: tf.io.FixedLenFeature([lengths[name]], tf.int64) for name in TRAINING_SPEC}

    def decode(records):
        parsed = tf.io.parse_example(records, spec)
        out = {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
        out["start_positions"] = out["start_positions"][:, 0]
        out["end_positions"] = out["end_positions"][:, 0]
        return out

    data = training_batches(tf.data.TFRecordDataset(path), batch_size, seed, start_batch, num_features,
                            shuffle_buffer_size)
    return data.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def training_task(examples: list[SquadExample], tokenizer: FullTokenizer, max_seq_length: int, schedule: Schedule,
                  *, doc_stride: int, max_query_length: int, features_path: str) -> TrainingTask:
    """The `TrainingTask`. As the original: `int(examples / batch size * epochs)` steps, the
    examples shuffled with `random.Random(12345)` before windowing; the features (streamed to
    `features_path`, re-used when the same) in a new order every epoch (`Schedule.batches`)."""
    reused, count = write_training_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                            features_path)
    return schedule.training_task(
        len(examples), span_loss_fn, example_totals,
        lambda start: training_dataset(features_path, max_seq_length, schedule.batch_size, schedule.seed, start,
                                       count, schedule.shuffle_buffer_size),
        summary=f"{'re-used' if reused else 'wrote'} {features_path} ({count} features)", features_path=features_path)


def predict(driver: Driver, examples: list[SquadExample], tokenizer: FullTokenizer, squad: SquadOptions,
            max_seq_length: int, batch_size: int, dynamic_padding: bool = True) -> tuple[dict, dict, dict]:
    """Runs the driver's model over the examples' windows (`squad`'s stride and query length),
    `batch_size` at a time; returns (predictions, nbest, null odds) as `compute_predictions` with
    `squad`'s answer settings. With `dynamic_padding` each batch is cut to its longest window; the
    logits of the positions past it (padding, never an answer) are `PADDING_LOGIT`."""
    features = convert_examples_to_features(examples, tokenizer, max_seq_length, squad.doc_stride,
                                            squad.max_query_length, False)
    dataset = tf.data.Dataset.from_tensor_slices(feature_arrays(features, False)).batch(batch_size)
    if dynamic_padding:
        dataset = dataset.map(driver.trim)
    out = driver.predict(dataset, span_logits(max_seq_length))
    results = [RawResult(f.unique_id, np.asarray(s, np.float64).tolist(), np.asarray(e, np.float64).tolist())
               for f, s, e in zip(features, out["start"], out["end"])]
    return compute_predictions(examples, features, results, squad.n_best_size, squad.max_answer_length,
                               tokenizer.do_lower_case, squad.version_2_with_negative, squad.null_score_diff_threshold,
                               tokenizer.decode)


@functools.cache
def span_logits(max_seq_length: int):
    """The prediction step's outputs: {"start", "end": [B, max_seq_length]} logits, the positions
    past a cut batch's longest window at `PADDING_LOGIT` (one function per length, so a driver
    re-uses its trace)."""

    def logits(model, batch):
        start, end = model(batch, training=False)
        return {"start": pad_to(start, max_seq_length, PADDING_LOGIT),
                "end": pad_to(end, max_seq_length, PADDING_LOGIT)}

    return logits


def write_predictions(output_dir, predictions, nbest, null_odds=None) -> list[str]:
    """predictions.json, nbest_predictions.json and (v2.0) null_odds.json, each written under a
    temporary name and renamed; returns their paths."""
    outputs = {"predictions.json": predictions, "nbest_predictions.json": nbest}
    if null_odds is not None:
        outputs["null_odds.json"] = null_odds
    paths = []
    for name, value in outputs.items():
        path = os.path.join(output_dir, name)
        with storage.atomic_output(path) as f:
            json.dump(value, f, indent=2, ensure_ascii=False)
        paths.append(path)
    return paths


@dataclasses.dataclass(frozen=True)
class SquadOptions:
    """The SQuAD files and the original's window and answer settings."""
    train_file: str | None = None
    predict_file: str | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    do_lower_case: bool = True
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    eval_metric: str = "squad"             # squad (the official scripts) | cmrc2018


@dataclasses.dataclass
class SquadPredictions:
    """What `predict` gives: the answer of each question, the n best, and (v2.0) the null odds."""
    predictions: dict
    nbest: dict
    null_odds: dict


@register("squad")
class SquadTask(FinetuningTask):
    """SQuAD v1.1 / v2.0 and Chinese MRC: trains on `train_file`; the dev split ("dev", with an
    evaluation) and the test split are both `predict_file`, its predictions written as the
    original's files; the evaluation is the official script's (or CMRC 2018's)."""

    def __init__(self, options: TaskOptions, squad: SquadOptions):
        super().__init__(options)
        self.squad = squad
        self.metrics = reported_metrics(squad.eval_metric, squad.version_2_with_negative)

    def read(self, splits: Sequence[str]) -> TaskData:
        """Questions of `train_file` (an error when none is usable) and of `predict_file`: the dev
        split where the run evaluates, else the test split."""
        v2 = self.squad.version_2_with_negative
        data = TaskData()
        if "train" in splits:
            data.train, skipped = read_squad_examples(self.squad.train_file, True, v2)
            if not data.train:
                raise InputError(f"train_file={self.squad.train_file}: no usable questions", options=("train_file",))
            console.say(f"training on {len(data.train)} questions ({skipped} skipped)")
        if "dev" in splits or "test" in splits:
            examples = read_squad_examples(self.squad.predict_file, False, v2)[0]
            setattr(data, "dev" if "dev" in splits else "test", examples)
        return data

    def build_model(self, config):
        return modeling.BertSpanLabeler(config)

    def training_task(self, examples, tokenizer, schedule):
        storage.makedirs(self.options.output_dir)
        return training_task(examples, tokenizer, self.options.max_seq_length, schedule,
                             doc_stride=self.squad.doc_stride, max_query_length=self.squad.max_query_length,
                             features_path=os.path.join(self.options.output_dir, "train.tf_record"))

    def predict(self, driver, tokenizer, examples, split):
        return SquadPredictions(*predict(driver, examples, tokenizer, self.squad, self.options.max_seq_length,
                                         self.options.batch_size(split), self.options.dynamic_padding))

    def evaluate(self, examples, predicted, step, selection):
        return Evaluation({**self.score(predicted), "global_step": step}, predicted)

    def score(self, predicted: SquadPredictions) -> dict:
        """The official scores of the predictions against `predict_file`'s answers."""
        from bert_realformer.tasks.squad import cmrc2018_metrics
        from bert_realformer.tasks.squad.metrics import evaluate, evaluate_v1
        dataset = json.loads(read_text(self.squad.predict_file))["data"]
        if self.squad.eval_metric == "cmrc2018":
            return cmrc2018_metrics.evaluate(dataset, predicted.predictions)
        if self.squad.version_2_with_negative:
            return evaluate(dataset, predicted.predictions, predicted.null_odds, self.squad.null_score_diff_threshold)
        return evaluate_v1(dataset, predicted.predictions)

    def write_predictions(self, examples, predicted, split):
        return write_predictions(self.options.output_dir, predicted.predictions, predicted.nbest,
                          predicted.null_odds if self.squad.version_2_with_negative else None)
