"""The training loss of a classifier: the original's cross-entropy, or focal loss (Lin et al.
2017, "Focal Loss for Dense Object Detection"), with label smoothing (Szegedy et al. 2016) and
class weights for imbalanced classes.

For logits z [B, C] and labels y [B], p = softmax(z), targets t = (1 - e) onehot(y) + e / C
(e: the label smoothing), each example's loss is
    cross-entropy:  l = -sum_c t_c log p_c
    focal:          l = -sum_c t_c (1 - p_c)^gamma log p_c   (gamma 0: cross-entropy)
and the step's loss is the weighted mean sum_i w_{y_i} l_i / sum_i w_{y_i} over the step's whole
batch (every replica and micro-batch), w the class weights (all 1: the plain mean, as the
original). Weighting the mean rather than the sum keeps a model that has learned nothing (p =
1/C everywhere) at the same loss whatever the weights: ln C for cross-entropy, (1 - 1/C)^gamma
ln C for focal loss (`chance_loss`, what the stuck check compares with).

R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks") runs the model
twice with different dropout masks and trains on each example's
    l = 1/2 (l(p1) + l(p2)) + alpha/4 (KL(p1 || p2) + KL(p2 || p1))
(the paper's loss halved, so that the loss stays on the scale of one pass), weighted as above.

Class weights "balanced" are sklearn's: w_c = N / (C n_c), n_c the training examples of class c
(a class with none gets 0: no example carries it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.text_files import read_lines

LOSSES = ("cross_entropy", "focal")


@dataclasses.dataclass(frozen=True)
class ClassifierLoss:
    """kind: "cross_entropy" or "focal"; focal_gamma: focal loss's gamma; label_smoothing: e in
    [0, 1); class_weights: one weight per label (in the run's label order), or None (all 1);
    rdrop_alpha: R-Drop's weight of the divergence between two dropout passes (0: one pass)."""
    kind: str = "cross_entropy"
    focal_gamma: float = 2.0
    label_smoothing: float = 0.0
    class_weights: tuple[float, ...] | None = None
    rdrop_alpha: float = 0.0

    def __post_init__(self):
        if self.kind not in LOSSES:
            raise ValueError(f"unknown loss {self.kind!r}; expected one of {', '.join(LOSSES)}")

    @property
    def is_original(self) -> bool:
        """Whether this is the original's loss (the plain mean cross-entropy)."""
        return (self.kind == "cross_entropy" and not self.label_smoothing and self.class_weights is None
                and not self.rdrop_alpha)

    def per_example(self, logits, labels):
        """float32 logits [B, C] and int labels [B] -> each example's loss l [B] (unweighted)."""
        num_classes = tf.shape(logits)[-1]
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        targets = tf.one_hot(labels, num_classes, dtype=tf.float32)
        if self.label_smoothing:
            targets = targets * (1.0 - self.label_smoothing) + self.label_smoothing / tf.cast(num_classes, tf.float32)
        if self.kind == "focal":  # (1 - p kept above 0: its power's gradient stays finite where p rounds to 1)
            targets = targets * tf.pow(tf.maximum(-tf.math.expm1(log_probs), 1e-30), self.focal_gamma)
        return -tf.reduce_sum(targets * log_probs, axis=-1)

    def weights(self, labels):
        """The class weight of each example [B] (float32; all 1 without class weights)."""
        if self.class_weights is None:
            return tf.ones(tf.shape(labels), tf.float32)
        return tf.gather(tf.constant(self.class_weights, tf.float32), labels)

    def weighted_sum(self, logits, labels):
        """sum_i w_{y_i} l_i over these examples: the numerator of the step's loss."""
        return tf.reduce_sum(self.weights(labels) * self.per_example(logits, labels))

    def rdrop_weighted_sum(self, logits, again, labels):
        """R-Drop's sum_i w_{y_i} l_i of two passes' logits [B, C] (see the module docstring)."""
        log_p, log_q = tf.nn.log_softmax(logits, axis=-1), tf.nn.log_softmax(again, axis=-1)
        symmetric_kl = tf.reduce_sum((tf.exp(log_p) - tf.exp(log_q)) * (log_p - log_q), axis=-1)  # [B]
        per_example = (0.5 * (self.per_example(logits, labels) + self.per_example(again, labels))
                       + 0.25 * self.rdrop_alpha * symmetric_kl)
        return tf.reduce_sum(self.weights(labels) * per_example)

    def totals(self, features: dict) -> dict:
        """The step-wide total the loss is divided by (a `TotalsFn`): the examples' summed class
        weight (their number without class weights)."""
        return {"examples": tf.reduce_sum(self.weights(features["label_ids"]))}

    def chance_loss(self, num_classes: int) -> float | None:
        """The loss of a model that gives every class 1/C; None for fewer than two classes."""
        if num_classes < 2:
            return None
        chance = math.log(num_classes)
        if self.kind == "focal":
            chance *= (1.0 - 1.0 / num_classes) ** self.focal_gamma
        return chance


def balanced_class_weights(labels: Sequence[int], num_classes: int) -> tuple[float, ...]:
    """sklearn's "balanced" weights N / (C n_c) of label indices `labels` (0 for an absent class)."""
    counts = np.bincount(np.asarray(labels, np.int64), minlength=num_classes)
    total = counts.sum()
    return tuple(float(total / (num_classes * n)) if n else 0.0 for n in counts)


def read_class_weights(path: str, label_list: Sequence[str]) -> tuple[float, ...]:
    """The weights of a file of lines `LABEL<TAB>WEIGHT`, one for each label of `label_list`
    (in any order; blank lines skipped), in `label_list`'s order. An `InputError` names the
    file and line of a malformed line, a weight not above 0, a repeated or unknown label, or
    the labels missing."""
    weights: dict[str, float] = {}
    for number, line in read_lines(path):
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        label, _, value = line.rpartition("\t")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not label or not math.isfinite(weight) or weight <= 0:  # (a batch of weight 0 would divide by 0)
            raise InputError(f"{path}:{number}: expected LABEL<TAB>WEIGHT with a weight > 0, got {line!r}")
        if label not in label_list:
            raise InputError(f"{path}:{number}: {label!r} is not a label of this task "
                             f"({', '.join(label_list[:10])}{' ...' if len(label_list) > 10 else ''})")
        if label in weights:
            raise InputError(f"{path}:{number}: {label!r} is given a weight twice")
        weights[label] = weight
    missing = [label for label in label_list if label not in weights]
    if missing:
        raise InputError(f"{path}: no weight for the labels {', '.join(missing[:10])}"
                         f"{' ...' if len(missing) > 10 else ''}")
    return tuple(weights[label] for label in label_list)
