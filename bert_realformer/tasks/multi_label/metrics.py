"""Multi-label results: an example has each label whose probability reaches that label's
decision threshold. Per label, precision = TP / (TP + FP), recall = TP / (TP + FN), F1 their
harmonic mean (0 where undefined); micro: from the counts summed over labels; macro: the mean
of the labels' F1; subset accuracy: the share of examples whose labels are all right.

`tuned_thresholds` picks each label's threshold on the dev set (the grid value with the best F1
for that label; ties to the one nearest 0.5): the dev metrics at tuned thresholds flatter the
model, as any choice made on the data it is scored on does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

REPORTED = ("eval_micro_f1", "eval_macro_f1", "eval_micro_precision", "eval_micro_recall", "eval_subset_accuracy",
            "eval_loss")
THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95


def _counts(predicted, labels):
    """(TP, FP, FN) per label [C] of 0/1 predictions and labels [N, C]."""
    predicted, labels = predicted.astype(bool), labels.astype(bool)
    return ((predicted & labels).sum(0), (predicted & ~labels).sum(0), (~predicted & labels).sum(0))


def _f1(tp, fp, fn):
    """(precision, recall, f1), arrays or scalars, 0 where undefined."""
    tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
    precision = np.divide(tp, tp + fp, out=np.zeros_like(tp), where=tp + fp > 0)
    recall = np.divide(tp, tp + fn, out=np.zeros_like(tp), where=tp + fn > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(tp), where=precision + recall > 0)
    return precision, recall, f1


def multi_label_results(logits: np.ndarray, labels: np.ndarray, label_list: Sequence[str],
                        thresholds: Sequence[float], global_step: int) -> dict:
    """eval_results.txt's entries for logits [N, C], 0/1 labels [N, C] and one threshold per label."""
    logits, labels = np.asarray(logits, np.float64), np.asarray(labels, np.int64)
    predicted = sigmoid(logits) >= np.asarray(thresholds)[None, :]
    tp, fp, fn = _counts(predicted, labels)
    micro_p, micro_r, micro_f1 = _f1(tp.sum(), fp.sum(), fn.sum())
    precision, recall, f1 = _f1(tp, fp, fn)
    # binary cross-entropy from the logits: max(z, 0) - z y + log(1 + exp(-|z|))
    bce = np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))
    result = {"eval_micro_f1": float(micro_f1), "eval_micro_precision": float(micro_p),
              "eval_micro_recall": float(micro_r), "eval_macro_f1": float(f1.mean()),
              "eval_subset_accuracy": float(np.mean(np.all(predicted == labels.astype(bool), axis=1))),
              "eval_loss": float(bce.mean()), "global_step": global_step,
              "thresholds": json.dumps({label: float(t) for label, t in zip(label_list, thresholds)})}
    for i, label in enumerate(label_list):
        result.update({f"class_{label}_precision": float(precision[i]), f"class_{label}_recall": float(recall[i]),
                       f"class_{label}_f1": float(f1[i]), f"class_{label}_support": int(labels[:, i].sum())})
    return result


def tuned_thresholds(logits: np.ndarray, labels: np.ndarray, grid: Sequence[float] = THRESHOLD_GRID) -> list[float]:
    """Each label's threshold from `grid` with the best F1 on these examples (ties: the one
    nearest 0.5; a label no example has keeps 0.5)."""
    probabilities, labels = sigmoid(np.asarray(logits, np.float64)), np.asarray(labels, np.int64)
    order = sorted(grid, key=lambda t: abs(t - 0.5))
    chosen = []
    for c in range(labels.shape[1]):
        if not labels[:, c].any():
            chosen.append(0.5)
            continue
        scores = [_f1(*(x[0] for x in _counts(probabilities[:, c:c + 1] >= t, labels[:, c:c + 1])))[2]
                  for t in order]
        chosen.append(float(order[int(np.argmax(scores))]))
    return chosen


def sigmoid(logits):
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))
