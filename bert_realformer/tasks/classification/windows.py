"""How a long document's windows (`doc_stride`) make one prediction: the poolings of their
logits, and the dev-set choice among them (`--window_pooling=auto`).

    max     each class's largest logit (a class wins by its strongest window, and a window can
            abstain with low logits for every class: the pooling of multiple-instance learning)
    mean    their mean (the renormalised mean of the windows' log-probabilities: every window's
            evidence counts)
    first   the first window's logits alone (what head truncation reads, from the same model)
    auto    trains as `max`; every dev evaluation reads the windows each of the three ways and
            keeps the one its selection metric prefers (`choose_pooling`): one model, one pass
            over the windows, three readings

Where the evidence is spread or past the head, `max` reads it; where it is in the head, the
windows that hold none of it can only add noise to `max`, and `first` reads the head alone
(bench/long_documents.py measures each). Regression pools scores the same ways.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

import numpy as np

logger = logging.getLogger(__name__)

POOLINGS = ("max", "mean", "first")
AUTO = "auto"
CHOICES = (*POOLINGS, AUTO)


UNCHOSEN = "max"  # what `auto` reads (and trains) as until a dev evaluation chooses


def training_pooling(pooling: str) -> str:
    """The pooling a document's windows are trained with (`--window_training=pooled`): `auto`
    trains as `max` (`first` is not trained on windows: it is head truncation)."""
    return UNCHOSEN if pooling == AUTO else pooling


def served_reading(doc_stride: int | None, pooling: str, truncation: str) -> tuple[int | None, str, str]:
    """(doc_stride, pooling, truncation) that serve texts as a run recorded reading them: the
    first window alone is head truncation without windows; `auto` never chosen is max."""
    if doc_stride and pooling == "first":
        return None, UNCHOSEN, "head"
    return doc_stride, training_pooling(pooling), truncation


def pool_windows(values, window_mask, pooling: str):
    """[B, W, C] values of a batch of documents' windows (logits; scores for regression, in text
    order), `window_mask` [B, W] (1 for real windows) -> [B, C]: their mean or maximum over each
    document's real windows (`combine_windows`' pooling, in the graph)."""
    import tensorflow as tf
    mask = tf.cast(window_mask, values.dtype)[:, :, None]
    if pooling == "max":
        return tf.reduce_max(tf.where(mask > 0, values, tf.cast(-1e9, values.dtype)), axis=1)
    if pooling == "mean":
        return tf.reduce_sum(values * mask, axis=1) / tf.reduce_sum(mask, axis=1)
    raise ValueError(f"documents are trained with max or mean pooling, not {pooling}")


@dataclasses.dataclass(frozen=True)
class WindowOutputs:
    """A prediction pass over the windows of `num_examples` documents: `logits` [W, C] (scores
    [W, 1] for regression), each window's document `example_index` [W] and place in it
    `window_index` [W] (0: the first), and every document's label `labels` [N]."""
    logits: np.ndarray
    example_index: np.ndarray
    window_index: np.ndarray
    labels: np.ndarray
    regression: bool

    @property
    def num_examples(self) -> int:
        return len(self.labels)

    def combined(self, pooling: str) -> np.ndarray:
        """One row per document [N, C]: the softmax of its windows' pooled logits (the pooled
        scores for regression). A document of one window keeps that window's output."""
        if pooling == "first":
            first = self.window_index == 0
            return combine_windows(self.logits[first], self.example_index[first], self.num_examples,
                                   self.regression, "max")
        return combine_windows(self.logits, self.example_index, self.num_examples, self.regression, pooling)


def combine_windows(logits: np.ndarray, example_index: np.ndarray, num_examples: int, regression: bool,
                    pooling: str = "mean") -> np.ndarray:
    """Window logits [W, C] (scores for regression) of examples `example_index` [W] -> one row
    per example [N, C]: the softmax of its windows' pooled logits (the mean, or each class's
    maximum), or the pooled scores for regression."""
    values = logits.astype(np.float64)
    counts = np.bincount(example_index, minlength=num_examples)
    if pooling == "max":
        pooled = np.full((num_examples, values.shape[1]), -np.inf)
        np.maximum.at(pooled, example_index, values)
    else:
        pooled = np.zeros((num_examples, values.shape[1]))
        np.add.at(pooled, example_index, values)
        pooled /= np.maximum(counts, 1)[:, None]
    if not regression:
        pooled = np.exp(pooled - pooled.max(axis=1, keepdims=True))
        pooled /= pooled.sum(axis=1, keepdims=True)
    return pooled.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Reading:
    """The pooling a dev evaluation chose, its result (eval_results.txt entries) and outputs."""
    pooling: str
    result: dict
    outputs: np.ndarray


def choose_pooling(windows: WindowOutputs, pooling: str, evaluate: Callable[[np.ndarray], dict],
                   metric: str, better: Callable[[float, float | None], bool]) -> Reading:
    """The evaluation of `windows` read with `pooling`; with `auto`, read each of `POOLINGS` ways
    and the one whose `metric` is `better` (ties keep the earlier: max, then mean, then first),
    its result naming it (`window_pooling`) with every reading's `metric` (`METRIC_by_POOLING`).
    `evaluate(outputs [N, C]) -> result`."""
    if pooling != AUTO:
        outputs = windows.combined(pooling)
        return Reading(pooling, evaluate(outputs), outputs)
    readings = []
    for candidate in POOLINGS:
        outputs = windows.combined(candidate)
        readings.append(Reading(candidate, evaluate(outputs), outputs))
    chosen = None
    for reading in readings:
        if chosen is None or better(reading.result[metric], chosen.result[metric]):
            chosen = reading
    by_pooling = {f"{metric}_by_{r.pooling}": r.result[metric] for r in readings}
    return dataclasses.replace(chosen, result={**chosen.result, **by_pooling, "window_pooling": chosen.pooling})


def recorded_choice(pooling: str, weights_prefix: str | None, output_dir: str) -> str:
    """The pooling to predict with where no dev evaluation chose one in this run: `pooling`
    itself; for `auto`, the choice recorded with the best checkpoint the weights came from
    (best.json beside `weights_prefix`), else the one the run in `output_dir` recorded
    (training_options.json), else max."""
    from bert_realformer.finetuning import best_checkpoint
    from bert_realformer.training import recorded_options
    if pooling != AUTO:
        return pooling
    directory = os.path.dirname(weights_prefix or "")
    if os.path.basename(directory) == best_checkpoint.BEST_DIR:
        record = best_checkpoint.read_record(os.path.dirname(directory))
        if record and best_checkpoint.checkpoint_prefix(os.path.dirname(directory), record["step"]) == weights_prefix:
            chosen = record.get("metrics", {}).get("window_pooling")
            if chosen in POOLINGS:
                logger.info("--window_pooling=auto: %s pooling, as chosen on the dev set at step %s (%s)", chosen,
                            record["step"], weights_prefix)
                return chosen
    chosen = recorded_options.read(output_dir).get("classifier_input", {}).get("window_pooling")
    if chosen in POOLINGS:
        logger.info("--window_pooling=auto: %s pooling, as the run in %s chose on the dev set", chosen, output_dir)
        return chosen
    logger.warning("--window_pooling=auto: no dev evaluation chose how to pool the windows (no --do_eval, and "
                   "neither the weights nor the run record a choice): %s pooling", UNCHOSEN)
    return UNCHOSEN
