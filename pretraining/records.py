"""The pretraining TFRecord schema (the original's feature names, dtypes and lengths), written
without TensorFlow.

Per example: `input_ids`, `input_mask`, `segment_ids` (int64 x max_seq_length, zero padded),
`masked_lm_positions`, `masked_lm_ids` (int64 x max_predictions_per_seq, zero padded),
`masked_lm_weights` (float x max_predictions_per_seq, 1.0 real / 0.0 padding),
`next_sentence_labels` (int64 x 1; 1 = B is a random sentence).

Records are `tf.train.Example` protos encoded here directly (protobuf wire format) and framed
as TFRecord (length, masked CRC-32C, data, masked CRC-32C), so writing needs neither a
TensorFlow import nor proto objects. Tests parse the files with TensorFlow.
"""

import array
import functools
import os
import struct

import google_crc32c

FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")


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


# ------------------------------------------------------------------ protobuf wire format
def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_SMALL_VARINTS = [_varint(i) for i in range(1 << 16)]


def _length_delimited(tag, payload):
    n = len(payload)
    return tag + (_SMALL_VARINTS[n] if n < 65536 else _varint(n)) + payload


def _int64_feature(values):
    """Feature{int64_list: Int64List{value: packed}} for non-negative values."""
    low, high = (min(values), max(values)) if values else (0, 0)
    if low < 0:
        raise ValueError("negative values are not written by this encoder")
    if high < 128:
        payload = bytes(values)  # one byte each
    elif high < 65536:
        payload = b"".join(map(_SMALL_VARINTS.__getitem__, values))
    else:
        payload = b"".join(map(_varint, values))
    return _length_delimited(b"\x1a", _length_delimited(b"\x0a", payload))


def _float_feature(values):
    """Feature{float_list: FloatList{value: packed}}."""
    payload = struct.pack(f"<{len(values)}f", *values)
    return _length_delimited(b"\x12", _length_delimited(b"\x0a", payload))


_KEYS = {name: _length_delimited(b"\x0a", name.encode()) for name in FEATURE_ORDER}


def encode_example(features):
    """{name: bytes of an encoded Feature} -> serialized tf.train.Example."""
    entries = b"".join(_length_delimited(b"\x0a", _KEYS[name] + _length_delimited(b"\x12", feature))
                       for name, feature in features.items())
    return _length_delimited(b"\x0a", entries)


@functools.lru_cache(maxsize=4096)
def _mask_feature(n, length):
    return _int64_feature([1] * n + [0] * (length - n))


@functools.lru_cache(maxsize=4096)
def _weights_feature(m, length):
    return _float_feature([1.0] * m + [0.0] * (length - m))


def instance_to_example(instance, max_seq_length, max_predictions_per_seq):
    """A `TrainingInstance` -> serialized `tf.train.Example`, padded as the original writer."""
    n = len(instance.input_ids)
    m = len(instance.masked_lm_positions)
    if n > max_seq_length:
        raise ValueError(f"instance of {n} tokens exceeds max_seq_length {max_seq_length}")
    pad = [0] * (max_seq_length - n)
    mpad = [0] * (max_predictions_per_seq - m)
    return encode_example({
        "input_ids": _int64_feature(list(instance.input_ids) + pad),
        "input_mask": _mask_feature(n, max_seq_length),
        "segment_ids": _int64_feature(list(instance.segment_ids) + pad),
        "masked_lm_positions": _int64_feature(list(instance.masked_lm_positions) + mpad),
        "masked_lm_ids": _int64_feature(list(instance.masked_lm_ids) + mpad),
        "masked_lm_weights": _weights_feature(m, max_predictions_per_seq),
        "next_sentence_labels": _int64_feature([1 if instance.is_random_next else 0]),
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


# ------------------------------------------------------------------ TFRecord framing
def _masked_crc(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data):
    """One TFRecord: length, its masked CRC-32C, the data, its masked CRC-32C."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", _masked_crc(header)) + data + struct.pack("<I", _masked_crc(data))


class AtomicRecordWriters:
    """Round-robin TFRecord writers over `paths`, each written to `<path>.tmp-<pid>` and renamed
    only by `commit()`; `abort()` (or leaving the `with` block on an error) removes them."""

    def __init__(self, paths):
        self.paths = list(paths)
        self._tmp = [f"{p}.tmp-{os.getpid()}" for p in self.paths]
        for path in self.paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._files = [open(t, "wb", buffering=1 << 20) for t in self._tmp]
        self._next = 0
        self.written = 0

    def write(self, record):
        """Writes one serialized record (the framing is added here)."""
        self._files[self._next].write(frame_record(record))
        self._next = (self._next + 1) % len(self._files)
        self.written += 1

    def commit(self):
        for f in self._files:
            f.close()
        for tmp, path in zip(self._tmp, self.paths):
            os.replace(tmp, path)

    def abort(self):
        for f in self._files:
            f.close()
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
