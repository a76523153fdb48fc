"""The pretraining TFRecord schema (the original's feature names, dtypes and lengths), written
without TensorFlow.

Per example: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length, zero padded),
`masked_lm_positions`, `masked_lm_ids` (int64 x max_predictions_per_seq, zero padded),
`masked_lm_weights` (float x max_predictions_per_seq, 1.0 real / 0.0 padding),
`next_sentence_labels` (int64 x 1; 1 = B is a random sentence).

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


@functools.lru_cache(maxsize=4096)
def _mask_feature(n, length):
    return int64_feature([1] * n + [0] * (length - n))


@functools.lru_cache(maxsize=4096)
def _weights_feature(m, length):
    return float_feature([1.0] * m + [0.0] * (length - m))


def instance_to_example(instance, max_seq_length, max_predictions_per_seq):
    """A `TrainingInstance` -> serialized `tf.train.Example`, padded as the original writer."""
    n = len(instance.input_ids)
    m = len(instance.masked_lm_positions)
    if n > max_seq_length:
        raise ValueError(f"instance of {n} tokens exceeds max_seq_length {max_seq_length}")
    pad = [0] * (max_seq_length - n)
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

    def __init__(self, pool, max_seq_length, max_predictions_per_seq):
        self._pool = pool
        self._shape = (max_seq_length, max_predictions_per_seq)
        self._batch, self._pending, self._count = [], [], 0
        self._collected = 0  # self._pending[:self._collected] are lists of records

    def add(self, instance):
        # Arrays pickle as raw bytes: far cheaper for this process than lists of ints.
        fields = (array.array("i", instance.input_ids), bytes(instance.segment_ids),
                  array.array("i", instance.masked_lm_positions),
                  array.array("i", instance.masked_lm_ids), instance.is_random_next)
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


def _encode_fields(fields, max_seq_length, max_predictions_per_seq):
    from pretraining.instances import TrainingInstance
    input_ids, segment_ids, positions, ids, is_random_next = fields
    instance = TrainingInstance(list(input_ids), list(segment_ids), list(positions), list(ids),
                                is_random_next)
    return instance_to_example(instance, max_seq_length, max_predictions_per_seq)


def _encode_batch(batch, max_seq_length, max_predictions_per_seq):
    return [_encode_fields(fields, max_seq_length, max_predictions_per_seq) for fields in batch]


