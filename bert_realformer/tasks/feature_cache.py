"""Feature files cached beside a run: written once, re-used while nothing they depend on changes.

A cache is `PATH` (TFRecords) and `PATH.key` (JSON: the key and the record count). The key holds
digests of everything the features are made from -- the examples themselves, the vocabulary's
contents -- and the options, so switching any of them rebuilds the file instead of silently
re-using features of other data. Both files are written under temporary names and renamed. A
cache whose records are damaged (cut short, a CRC that does not match) is written again, said
in one warning line.
"""

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable

from bert_realformer import storage
from bert_realformer.tfrecords import AtomicRecordWriters, find_damage

logger = logging.getLogger(__name__)


def digest(rows: Iterable) -> str:
    """sha256 of the JSON of each row, in order (rows of strings, numbers, lists, None). Text
    may hold lone surrogates (JSON escapes of truncated emoji): they are hashed as they are
    (the tokenizer drops them)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def keyed_path(path: str, key: dict) -> str:
    """`path` with a digest of `key` before its extension (`eval.tf_record` ->
    `eval-<12 hex digits>.tf_record`): caches of other settings get other files, so runs that
    share a directory without claiming it (evaluation, prediction) never read each other's."""
    root, extension = os.path.splitext(path)
    short = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return f"{root}-{short}{extension}"


def cached_records(path: str, key: dict, records: Callable[[], Iterable[bytes]]) -> tuple[bool, int]:
    """Writes the serialized examples `records()` yields to `path` unless `path` exists with this
    `key`. Returns (re-used, number of records)."""
    key_path = path + ".key"
    if storage.exists(path) and storage.exists(key_path):
        try:
            stored = json.loads(storage.read_bytes(key_path))
        except (json.JSONDecodeError, UnicodeDecodeError):
            stored = None
        if isinstance(stored, dict) and stored.get("key") == key:
            damage = find_damage(path)
            if damage is None:
                return True, stored["count"]
            logger.warning("%s: %s; writing the feature cache again", path, damage)
    with AtomicRecordWriters([path]) as writer:
        for record in records():
            writer.write(record)
    storage.write_atomic(key_path, json.dumps({"key": key, "count": writer.written}, sort_keys=True))
    return False, writer.written


def record_count(path: str) -> int:
    """The number of records of a cache that `cached_records` wrote."""
    return json.loads(storage.read_bytes(path + ".key"))["count"]
