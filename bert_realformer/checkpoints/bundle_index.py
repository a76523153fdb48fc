"""The names and shapes of the tensors a TensorFlow checkpoint holds, read from its index file
alone and without TensorFlow, so that a script can compare them with its config before
TensorFlow starts.

A checkpoint's `PREFIX.index` is a table in LevelDB's format, written without compression: blocks
of keys sharing prefixes with the key before them, an index block naming the data blocks, and a
fixed-size footer naming the index block. Each key is a tensor's name and its value a
`BundleEntryProto` (a protocol buffer: the dtype, the shape, where the data lies); the empty key
holds the bundle's header.

    stored_shapes("chinese_roberta_wwm_ext/bert_model.ckpt")
    # {"bert/embeddings/word_embeddings": (21128, 768), ...}
"""

from __future__ import annotations

import struct

from bert_realformer import storage

_FOOTER_SIZE = 48  # two block handles padded to 40 bytes, then the magic number
_MAGIC = 0xDB4775248B80FB57
_BLOCK_TRAILER = 5  # a compression-type byte and a CRC after every block
_UNCOMPRESSED = 0
# BundleEntryProto's field `shape` (a TensorShapeProto), whose field `dim` repeats, each a Dim
# whose field `size` is the dimension.
_ENTRY_SHAPE, _SHAPE_DIM, _DIM_SIZE = 2, 2, 1


class UnreadableIndex(ValueError):
    """An index file not in the format described above."""


def stored_shapes(prefix: str) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} of the checkpoint at `prefix` (`PREFIX.index`); `UnreadableIndex`
    when the file is not a checkpoint index this reader understands."""
    data = storage.read_bytes(prefix + ".index")
    if len(data) < _FOOTER_SIZE or struct.unpack("<Q", data[-8:])[0] != _MAGIC:
        raise UnreadableIndex(f"{prefix}.index: not a TensorFlow checkpoint index")
    footer = data[-_FOOTER_SIZE:]
    _, position = _varint(footer, 0)  # (the meta-index block's handle: unused)
    _, position = _varint(footer, position)
    index_offset, position = _varint(footer, position)
    index_size, _ = _varint(footer, position)
    shapes = {}
    for _, handle in _block_entries(data, index_offset, index_size):
        offset, position = _varint(handle, 0)
        size, _ = _varint(handle, position)
        for key, value in _block_entries(data, offset, size):
            if key:  # (the empty key: the bundle's header)
                shapes[key.decode("utf-8")] = _shape_of(value)
    return shapes


def _block_entries(data: bytes, offset: int, size: int):
    """(key, value) of each entry of the block at `offset`, keys restored from their shared prefixes."""
    if offset + size + _BLOCK_TRAILER > len(data) or data[offset + size] != _UNCOMPRESSED:
        raise UnreadableIndex("a block of the index is outside the file or compressed")
    block = data[offset:offset + size]
    restarts = struct.unpack("<I", block[-4:])[0]
    end = len(block) - 4 * (restarts + 1)
    position, key = 0, b""
    while position < end:
        shared, position = _varint(block, position)
        unshared, position = _varint(block, position)
        value_size, position = _varint(block, position)
        key = key[:shared] + block[position:position + unshared]
        position += unshared
        yield key, block[position:position + value_size]
        position += value_size


def _shape_of(entry: bytes) -> tuple[int, ...]:
    shape = next((value for field, value in _fields(entry) if field == _ENTRY_SHAPE), b"")
    dims = [value for field, value in _fields(shape) if field == _SHAPE_DIM]
    return tuple(next((size for field, size in _fields(dim) if field == _DIM_SIZE), 0) for dim in dims)


def _fields(message: bytes):
    """(field number, value) of a protocol buffer message: an int for a varint, bytes otherwise."""
    position = 0
    while position < len(message):
        tag, position = _varint(message, position)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, position = _varint(message, position)
        elif wire_type == 2:
            length, position = _varint(message, position)
            value, position = message[position:position + length], position + length
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            value, position = message[position:position + width], position + width
        else:
            raise UnreadableIndex(f"a protocol buffer wire type {wire_type} in the index")
        yield field, value


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """The base-128 varint at `position` and the position after it."""
    result, shift = 0, 0
    while True:
        if position >= len(data):
            raise UnreadableIndex("the index ends inside a number")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return result, position
        shift += 7
