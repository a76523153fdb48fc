"""The pretraining TFRecord schema (the original's feature names, dtypes and lengths), written
without TensorFlow.

Per example: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length, zero padded),
`masked_lm_positions`, `masked_lm_ids` (int64 x max_predictions_per_seq, zero padded),
`masked_lm_weights` (float x max_predictions_per_seq, 1.0 real / 0.0 padding),
`next_sentence_labels` (int64 x 1; 1 = B is a random sentence).

Unmasked records (`create_pretraining_data.py --dynamic_masking`, masked as they are read by
`pretraining.dynamic_masking`): `input_ids`, `input_mask`, `segment_ids` as above, the real
tokens; `word_ids` (int64 x max_seq_length: per position the number of its word, 1, 2, ...,
0 for `[CLS]`, `[SEP]` and padding: what whole-word masking chooses from); `mask_token_id`
(int64 x 1: the vocabulary's `[MASK]`); `next_sentence_labels` unless made with `--no_nsp`. No
`masked_lm_*` features.

Records are encoded and written by `tfrecords` (no TensorFlow import). Tests parse the files
with TensorFlow.
"""

import array
import functools

from bert_realformer.tfrecords import encode_example, float_feature, int64_feature


def feature_spec(max_seq_length, max_predictions_per_seq):
    """`tf.io.parse_single_example` spec for the records."""
    import tensorflow as tf
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def unmasked_feature_spec(max_seq_length, next_sentence=True):
    """`tf.io.parse_single_example` spec for unmasked (dynamic masking) records."""
    import tensorflow as tf
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids", "word_ids")}
    spec["mask_token_id"] = tf.io.FixedLenFeature([1], tf.int64)
    if next_sentence:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


@functools.lru_cache(maxsize=4096)
def _mask_feature(n, length):
    return int64_feature([1] * n + [0] * (length - n))


@functools.lru_cache(maxsize=4096)
def _weights_feature(m, length):
    return float_feature([1.0] * m + [0.0] * (length - m))


def instance_to_example(instance, max_seq_length, max_predictions_per_seq, mask_token_id=None, next_sentence=True):
    """A `TrainingInstance` -> serialized `tf.train.Example`, padded as the original writer; an
    unmasked one (with `word_ids`) in the unmasked layout, which needs `mask_token_id` and
    holds `next_sentence_labels` only when `next_sentence`."""
    n = len(instance.input_ids)
    m = len(instance.masked_lm_positions)
    if n > max_seq_length:
        raise ValueError(f"instance of {n} tokens exceeds max_seq_length {max_seq_length}")
    pad = [0] * (max_seq_length - n)
    if instance.word_ids is not None:
        features = {"input_ids": int64_feature(list(instance.input_ids) + pad),
                    "input_mask": _mask_feature(n, max_seq_length),
                    "segment_ids": int64_feature(list(instance.segment_ids) + pad),
                    "word_ids": int64_feature(list(instance.word_ids) + pad),
                    "mask_token_id": int64_feature([mask_token_id])}
        if next_sentence:
            features["next_sentence_labels"] = int64_feature([1 if instance.is_random_next else 0])
        return encode_example(features)
    mpad = [0] * (max_predictions_per_seq - m)
    return encode_example({
        "input_ids": int64_feature(list(instance.input_ids) + pad),
        "input_mask": _mask_feature(n, max_seq_length),
        "segment_ids": int64_feature(list(instance.segment_ids) + pad),
        "masked_lm_positions": int64_feature(list(instance.masked_lm_positions) + mpad),
        "masked_lm_ids": int64_feature(list(instance.masked_lm_ids) + mpad),
        "masked_lm_weights": _weights_feature(m, max_predictions_per_seq),
        "next_sentence_labels": int64_feature([1 if instance.is_random_next else 0]),
    })


class ParallelEncoder:
    """Serializes instances in a process pool while the caller goes on making them.

    `add(instance)` returns the instance's index; `records()` returns the serialized records in
    index order. With `pool=None` it encodes in this process.
    """

    BATCH = 512
    MAX_IN_FLIGHT = 8  # batches handed to the pool and not yet collected (bounds memory)

    def __init__(self, pool, max_seq_length, max_predictions_per_seq, mask_token_id=None, next_sentence=True):
        self._pool = pool
        self._shape = (max_seq_length, max_predictions_per_seq, mask_token_id, next_sentence)
        self._batch, self._pending, self._count = [], [], 0
        self._collected = 0  # self._pending[:self._collected] are lists of records

    def add(self, instance):
        # Arrays pickle as raw bytes: far cheaper for this process than lists of ints.
        fields = (array.array("i", instance.input_ids), bytes(instance.segment_ids),
                  array.array("i", instance.masked_lm_positions),
                  array.array("i", instance.masked_lm_ids), instance.is_random_next,
                  None if instance.word_ids is None else array.array("i", instance.word_ids))
        if self._pool is None:
            self._pending.append([_encode_fields(fields, *self._shape)])
        else:
            self._batch.append(fields)
            if len(self._batch) >= self.BATCH:
                self._submit()
        self._count += 1
        return self._count - 1

    def _submit(self):
        self._pending.append(self._pool.apply_async(_encode_batch, (self._batch, *self._shape)))
        self._batch = []
        while len(self._pending) - self._collected > self.MAX_IN_FLIGHT:
            self._collect_one()

    def _collect_one(self):
        self._pending[self._collected] = self._pending[self._collected].get()
        self._collected += 1

    def records(self):
        if self._batch:
            self._submit()
        if self._pool is not None:
            while self._collected < len(self._pending):
                self._collect_one()
        return [record for part in self._pending for record in part]


def _encode_fields(fields, *shape):
    from bert_realformer.pretraining.instances import TrainingInstance
    input_ids, segment_ids, positions, ids, is_random_next, word_ids = fields
    instance = TrainingInstance(list(input_ids), list(segment_ids), list(positions), list(ids),
                                is_random_next, None if word_ids is None else list(word_ids))
    return instance_to_example(instance, *shape)


def _encode_batch(batch, *shape):
    return [_encode_fields(fields, *shape) for fields in batch]


