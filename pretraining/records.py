"""The pretraining TFRecord schema (the original's feature names, dtypes and lengths).

Per example: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length, zero padded),
`masked_lm_positions`, `masked_lm_ids` (int64 x max_predictions_per_seq, zero padded),
`masked_lm_weights` (float x max_predictions_per_seq, 1.0 real / 0.0 padding),
`next_sentence_labels` (int64 x 1; 1 = B is a random sentence).
"""

import os


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


def instance_to_example(instance, max_seq_length, max_predictions_per_seq):
    """A `TrainingInstance` -> serialized `tf.train.Example`."""
    import tensorflow as tf
    n = len(instance.input_ids)
    if n > max_seq_length:
        raise ValueError(f"instance of {n} tokens exceeds max_seq_length {max_seq_length}")
    pad = [0] * (max_seq_length - n)
    m = len(instance.masked_lm_positions)
    mpad = [0] * (max_predictions_per_seq - m)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    features = {
        "input_ids": ints(instance.input_ids + pad),
        "input_mask": ints([1] * n + pad),
        "segment_ids": ints(instance.segment_ids + pad),
        "masked_lm_positions": ints(instance.masked_lm_positions + mpad),
        "masked_lm_ids": ints(instance.masked_lm_ids + mpad),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=[1.0] * m + [0.0] * len(mpad))),
        "next_sentence_labels": ints([1 if instance.is_random_next else 0]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


class AtomicRecordWriters:
    """Round-robin TFRecord writers over `paths`, each written to `<path>.tmp-<pid>` and renamed
    only by `commit()`; `abort()` (or leaving the `with` block on an error) removes them."""

    def __init__(self, paths):
        import tensorflow as tf
        self.paths = list(paths)
        self._tmp = [f"{p}.tmp-{os.getpid()}" for p in self.paths]
        for path in self.paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._writers = [tf.io.TFRecordWriter(t) for t in self._tmp]
        self._next = 0
        self.written = 0

    def write(self, record):
        self._writers[self._next].write(record)
        self._next = (self._next + 1) % len(self._writers)
        self.written += 1

    def commit(self):
        for writer in self._writers:
            writer.close()
        for tmp, path in zip(self._tmp, self.paths):
            os.replace(tmp, path)

    def abort(self):
        for writer in self._writers:
            writer.close()
        for tmp in self._tmp:
            if os.path.exists(tmp):
                os.remove(tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()
