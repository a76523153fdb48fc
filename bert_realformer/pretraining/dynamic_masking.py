"""Masking unmasked records as they are read (dynamic masking, as RoBERTa and HFL's
`chinese-roberta-wwm-ext` were trained): other masks in every epoch, whole words at a time.

Per example, as the original `create_masked_lm_predictions` with one change:

* the number to predict is the original's `min(max_predictions_per_seq, max(1,
  round(tokens * masked_lm_prob)))`, tokens counting `[CLS]` and `[SEP]`;
* words (the record's `word_ids`: whole words, or single WordPieces) are taken in a random
  order, a word that would overshoot that number skipped, until it is reached; `[CLS]`,
  `[SEP]` and padding (word 0) are never chosen;
* each chosen word becomes `[MASK]` 80%, a random vocabulary id 10%, stays 10% of the time,
  chosen **per word** (the original draws per WordPiece): every piece of a word gets the same
  choice, a random replacement draws an id for each piece.

The draws are a pure function of (`seed`, `key`): in training the key is the example's
position in the input stream, which names the example and the epoch (a second epoch masks
the same example differently; a resumed run, each replica and each micro-batch get what the
uninterrupted single-device run got). Held-out evaluation keys each record by its index in the
files and uses `EVAL_SEED` whatever the run's seed, so the same records always get the same
masks: evaluation points compare across the steps of a run and across runs.
"""

import dataclasses

import numpy as np

EVAL_SEED = 20201223  # fixed masks for held-out evaluation, whatever --seed is


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
    """How unmasked records are masked (see the module docstring)."""
    masked_lm_prob: float
    max_predictions_per_seq: int
    vocab_size: int                # random replacements draw from [0, vocab_size)
    seed: int = 12345

    def for_evaluation(self) -> "DynamicMasking":
        return dataclasses.replace(self, seed=EVAL_SEED)


def number_to_predict(num_tokens: int, masked_lm_prob: float, max_predictions_per_seq: int) -> int:
    """The original's count: Python's round (half to even) of num_tokens * masked_lm_prob, at
    least 1, at most max_predictions_per_seq."""
    return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def mask_example(input_ids, input_mask, word_ids, mask_token_id, key, masking: DynamicMasking):
    """One example [S] -> (masked input_ids [S], positions [M] ascending, original ids [M])."""
    rng = np.random.default_rng((masking.seed, int(key)))
    length = int(np.sum(input_mask))
    num_to_predict = number_to_predict(length, masking.masked_lm_prob, masking.max_predictions_per_seq)
    words = np.asarray(word_ids[:length])
    output = np.array(input_ids, dtype=np.int32)
    num_words = int(words.max(initial=0))
    if num_words == 0:
        return output, np.zeros([0], np.int32), np.zeros([0], np.int32)
    sizes = np.bincount(words, minlength=num_words + 1)
    chosen, count = [], 0
    for word in (rng.permutation(num_words) + 1).tolist():
        if count >= num_to_predict:
            break
        if count + sizes[word] > num_to_predict:  # a whole word that would overshoot is skipped
            continue
        chosen.append(word)
        count += int(sizes[word])
    chosen = np.asarray(chosen, dtype=words.dtype)
    first, second = rng.random(len(chosen)), rng.random(len(chosen))
    masked_words = chosen[first < 0.8]
    replaced_words = chosen[(first >= 0.8) & (second >= 0.5)]
    positions = np.flatnonzero(np.isin(words, chosen)).astype(np.int32)
    labels = output[positions].copy()
    output[np.isin(words, masked_words).nonzero()[0]] = mask_token_id
    replaced = np.flatnonzero(np.isin(words, replaced_words))
    output[replaced] = rng.integers(0, masking.vocab_size, size=len(replaced))
    return output, positions, labels


def mask_batch(input_ids, input_mask, word_ids, mask_token_id, keys, masking: DynamicMasking):
    """A batch [B, S] (numpy) -> (input_ids [B, S], masked_lm_positions, masked_lm_ids [B, P]
    int32 and masked_lm_weights [B, P] float32, zero padded: the static records' features)."""
    batch, width = len(input_ids), masking.max_predictions_per_seq
    ids = np.empty(np.shape(input_ids), np.int32)
    positions = np.zeros([batch, width], np.int32)
    labels = np.zeros([batch, width], np.int32)
    weights = np.zeros([batch, width], np.float32)
    for b in range(batch):
        ids[b], p, lab = mask_example(input_ids[b], input_mask[b], word_ids[b], int(mask_token_id[b][0]),
                                      keys[b], masking)
        positions[b, :len(p)], labels[b, :len(p)], weights[b, :len(p)] = p, lab, 1.0
    return ids, positions, labels, weights


def apply_masks(features: dict, keys, masking: DynamicMasking) -> dict:
    """In a tf.data map: the parsed unmasked batch (int32 tensors [B, S]; `keys` [B] int64)
    -> the features the model reads (`masked_lm_*` added, `word_ids` and `mask_token_id`
    dropped)."""
    import tensorflow as tf

    def run(input_ids, input_mask, word_ids, mask_token_id, batch_keys):
        return mask_batch(input_ids, input_mask, word_ids, mask_token_id, batch_keys, masking)

    ids, positions, labels, weights = tf.numpy_function(
        run, [features["input_ids"], features["input_mask"], features["word_ids"], features["mask_token_id"], keys],
        [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
    batch, seq = features["input_ids"].shape
    width = masking.max_predictions_per_seq
    out = {k: v for k, v in features.items() if k not in ("word_ids", "mask_token_id")}
    out["input_ids"] = tf.ensure_shape(ids, [batch, seq])
    out["masked_lm_positions"] = tf.ensure_shape(positions, [batch, width])
    out["masked_lm_ids"] = tf.ensure_shape(labels, [batch, width])
    out["masked_lm_weights"] = tf.ensure_shape(weights, [batch, width])
    return out
