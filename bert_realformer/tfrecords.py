"""Writing TFRecord files of `tf.train.Example`s without TensorFlow.

Examples are encoded directly in the protobuf wire format (`encode_example` of features made
by `int64_feature` / `float_feature`) and framed as TFRecord (length, masked CRC-32C, data,
masked CRC-32C). Readers are TensorFlow's own.
"""

import functools
import struct

import google_crc32c

from bert_realformer import storage


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


def int64_feature(values):
    """Feature{int64_list: Int64List{value: packed}} for non-negative values (bytes)."""
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


def float_feature(values):
    """Feature{float_list: FloatList{value: packed}}."""
    payload = struct.pack(f"<{len(values)}f", *values)
    return _length_delimited(b"\x12", _length_delimited(b"\x0a", payload))


@functools.lru_cache(maxsize=256)
def _key(name):
    return _length_delimited(b"\x0a", name.encode())


def encode_example(features):
    """{name: bytes of an encoded Feature} -> serialized tf.train.Example."""
    entries = b"".join(_length_delimited(b"\x0a", _key(name) + _length_delimited(b"\x12", feature))
                       for name, feature in features.items())
    return _length_delimited(b"\x0a", entries)


# ------------------------------------------------------------------ TFRecord framing
def _masked_crc(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data):
    """One TFRecord: length, its masked CRC-32C, the data, its masked CRC-32C."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", _masked_crc(header)) + data + struct.pack("<I", _masked_crc(data))


class AtomicRecordWriters:
    """Round-robin TFRecord writers over `paths`, each written under a temporary name and moved
    to its path only by `commit()`; `abort()` (or leaving the `with` block on an error) removes
    them. A local path's temporary file is `<path>.tmp-<pid>` beside it; a remote path's (e.g.
    `gs://`) is a local temporary file, uploaded by `commit()` (`storage.upload`)."""

    def __init__(self, paths):
        self.paths = list(paths)
        self._tmp = [storage.local_staging_name(path) for path in self.paths]
        self._files = [storage.open_file(t, "wb") for t in self._tmp]
        self._next = 0
        self.written = 0

    def write(self, record):
        """Writes one serialized record (the framing is added here)."""
        self._files[self._next].write(frame_record(record))
        self._next = (self._next + 1) % len(self._files)
        self.written += 1

    def write_framed(self, records, ends):
        """Writes records already framed (`frame_record`) and concatenated in `records`; record
        k ends at `ends[k]`. They go round-robin on from where `write` left off."""
        view = memoryview(records)
        if len(self._files) == 1:
            self._files[0].write(view)
        else:
            start = 0
            for end in ends:
                self._files[self._next].write(view[start:end])
                self._next = (self._next + 1) % len(self._files)
                start = end
        self.written += len(ends)

    def commit(self):
        for f in self._files:
            f.close()
        for tmp, path in zip(self._tmp, self.paths):
            storage.upload(tmp, path)

    def abort(self):
        for f in self._files:
            f.close()
        for tmp in self._tmp:
            storage.remove(tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()
