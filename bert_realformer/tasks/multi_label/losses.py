"""The training loss of a multi-label classifier: for logits z [B, C] and 0/1 targets y [B, C],
each example's loss is the mean over its C labels of the binary cross-entropy of sigmoid(z)
(transformers' `BCEWithLogitsLoss`), and the step's loss their mean over the step's whole batch.

R-Drop (`rdrop_alpha`): two dropout passes z1, z2 and each example's
    l = 1/2 (l(z1) + l(z2)) + alpha/4 * mean_c (p1 - p2) (z1 - z2)
where (p1 - p2)(z1 - z2) = KL(p1 || p2) + KL(p2 || p1) for the Bernoulli distributions of one
label (p = sigmoid(z)): the classification loss's R-Drop, label by label.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class MultiLabelLoss:
    """Sigmoid binary cross-entropy over every label; `rdrop_alpha`: R-Drop's weight (0: one pass)."""
    rdrop_alpha: float = 0.0

    def per_example(self, logits, labels):
        """float32 logits [B, C] and 0/1 labels [B, C] -> each example's loss [B]."""
        targets = tf.cast(labels, tf.float32)
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), axis=-1)

    def weighted_sum(self, logits, labels):
        """The sum of the examples' losses: the numerator of the step's mean."""
        return tf.reduce_sum(self.per_example(logits, labels))

    def rdrop_weighted_sum(self, logits, again, labels):
        """R-Drop's sum over the examples of two passes' logits [B, C] (the module docstring)."""
        divergence = tf.reduce_mean((tf.sigmoid(logits) - tf.sigmoid(again)) * (logits - again), axis=-1)
        per_example = (0.5 * (self.per_example(logits, labels) + self.per_example(again, labels))
                       + 0.25 * self.rdrop_alpha * divergence)
        return tf.reduce_sum(per_example)

    def totals(self, features: dict) -> dict:
        """The step-wide count the loss is divided by (a `TotalsFn`): the examples."""
        return {"examples": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}
