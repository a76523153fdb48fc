"""The pretraining loss as one replica's (and one micro-batch's) share of the step's loss.

The original's losses (`modeling.pretraining_losses`) are means over a batch; the MLM one is
weighted, `sum(w * nll) / (sum(w) + 1e-5)`. Averaging per-replica or per-micro-batch means would
weight the parts with fewer real predictions too much, so each part returns its share:
`sum(w * nll) / (total sum(w) + 1e-5)` and `sum(nsp nll) / total examples`, with the totals
over every replica and micro-batch of the optimizer step (`pretraining_totals`, summed by the
training loop). The shares add up to exactly the original's loss on the whole step's batch.
"""

import tensorflow as tf

import modeling


def pretraining_totals(features):
    """What the shares are normalised by: {masked_lm_weight, examples} of these features."""
    return {"masked_lm_weight": tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32)),
            "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def replica_pretraining_loss(outputs, features, totals):
    """Returns (share of the total loss, {loss, masked_lm_loss, next_sentence_loss} shares);
    MLM-only models (no NSP outputs) have no next_sentence_loss and loss = masked_lm_loss."""
    losses = modeling.pretraining_losses(outputs, features)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    mlm = tf.reduce_sum(weights * losses["masked_lm_example_loss"]) / (totals["masked_lm_weight"] + 1e-5)
    if "next_sentence_example_loss" not in losses:
        return mlm, {"loss": mlm, "masked_lm_loss": mlm}
    nsp = tf.reduce_sum(losses["next_sentence_example_loss"]) / totals["examples"]
    total = mlm + nsp
    return total, {"loss": total, "masked_lm_loss": mlm, "next_sentence_loss": nsp}
