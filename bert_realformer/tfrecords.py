"""Writing TFRecord files of `tf.train.Example`s without TensorFlow.

Examples are encoded directly in the protobuf wire format (`encode_example` of features made
by `int64_feature` / `float_feature`) and framed as TFRecord (length, masked CRC-32C, data,
masked CRC-32C). Readers are TensorFlow's own; `find_damage` checks a file's framing and CRCs
(what TensorFlow's `DataLossError` does not say: which file).
"""

import contextlib
import functools
import struct

import google_crc32c

from bert_realformer import storage
from bert_realformer.errors import InputError


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


_SMALL_VARINTS = tuple(_varint(i) for i in range(1 << 16))


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


def find_damage(path, chunk_bytes=1 << 22):
    """The first fault in a TFRecord file's framing, as 'truncated record at offset N' or
    'corrupted record at offset N' (a length or data CRC that does not match), or None for a
    sound file. Reads the file once, in order."""
    offset = 0
    with storage.open_file(path, "rb") as f:
        reader = _ChunkedReader(f, chunk_bytes)
        while True:
            header = reader.take(12)
            if not header:
                return None  # the end, at a record boundary
            if len(header) < 12:
                return f"truncated record at offset {offset}"
            (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if _masked_crc(header[:8]) != length_crc:
                return f"corrupted record at offset {offset} (its length's CRC does not match)"
            body = reader.take(length + 4)
            if len(body) < length + 4:
                return f"truncated record at offset {offset} (a {length}-byte record cut short)"
            if _masked_crc(body[:length]) != struct.unpack("<I", body[length:])[0]:
                return f"corrupted record at offset {offset} (its data's CRC does not match)"
            offset += 12 + length + 4


class _ChunkedReader:
    """`take(n)`: the next n bytes of a file read in large chunks (fewer at its end)."""

    def __init__(self, f, chunk_bytes):
        self.f, self.chunk_bytes = f, chunk_bytes
        self.buffer, self.position = b"", 0

    def take(self, n):
        if len(self.buffer) - self.position < n:
            rest = [self.buffer[self.position:]]
            have = len(rest[0])
            while have < n:
                chunk = self.f.read(max(self.chunk_bytes, n - have))
                if not chunk:
                    break
                rest.append(chunk)
                have += len(chunk)
            self.buffer, self.position = b"".join(rest), 0
        out = self.buffer[self.position:self.position + n]
        self.position += len(out)
        return out


def check_files(paths, option):
    """Every record of every file checked (`find_damage`); the first damage found is an
    `InputError` naming the file and offset."""
    for path in paths:
        damage = find_damage(path)
        if damage:
            raise InputError(f"{option}: {path}: {damage}", options=(option,))


DAMAGED_INPUT_ADVICE = "copy the file again or leave it out"  # for a user's own input file


@contextlib.contextmanager
def naming_damaged_file(paths, name, after="", advice=DAMAGED_INPUT_ADVICE, options=()):
    """Turns TensorFlow's `DataLossError` (which names no file) while reading `paths` (`name`:
    what they are, e.g. the option that gave them, listed in `options`) into an `InputError` naming the damaged file
    and offset, found by checking each file, and `advice`; `after` is appended to the message
    (e.g. what was kept)."""
    import tensorflow as tf
    try:
        yield
    except tf.errors.DataLossError as error:
        reason = error.message.splitlines()[0] if error.message else "data loss"
        for path in paths:
            damage = find_damage(path)
            if damage:
                raise InputError(f"{name}: {path}: {damage}; {advice}{after}", options=options) from None
        where = f"one of {len(paths)} files" if len(paths) != 1 else paths[0]
        raise InputError(f"{name}: a damaged record in {where} ({reason}){after}", options=options) from None


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
        try:
            for f in self._files:
                f.close()  # (on a full disk, the last buffered bytes fail here)
            for tmp, path in zip(self._tmp, self.paths):
                storage.upload(tmp, path)
        except BaseException:
            self.abort()
            raise

    def abort(self):
        """Removes every temporary file, also when closing one fails (a full disk)."""
        for f in self._files:
            with contextlib.suppress(Exception):
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
