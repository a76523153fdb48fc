"""Labelled real text made into a task once: deduplicated, split by class with a fixed seed,
and described by its class balance and majority baseline."""

import random
import re
import types
from collections import Counter

FRACTIONS = types.MappingProxyType({"train": 0.8, "dev": 0.1, "test": 0.1})


def normalised(text: str) -> str:
    """What makes two texts the same one: case and runs of white space ignored."""
    return re.sub(r"\s+", " ", text).strip().lower()


def labelled_splits(rows, seed: int = 0, fractions=None) -> dict[str, list[tuple[str, str]]]:
    """[(text, label)] -> {split: [(text, label)]}: each text once (`normalised`; a text given two
    labels is dropped, the first of the same labelled kept), each class cut into `fractions`
    (default 80/10/10) after a shuffle by `seed`, each split in a shuffled order."""
    fractions = fractions or FRACTIONS
    labels_of, first = {}, {}
    for text, label in rows:
        key = normalised(text)
        labels_of.setdefault(key, set()).add(label)
        first.setdefault(key, (text, label))
    kept = [first[key] for key in first if len(labels_of[key]) == 1]
    rng = random.Random(seed)
    splits = {name: [] for name in fractions}
    for label in sorted({label for _, label in kept}):
        members = [row for row in kept if row[1] == label]
        rng.shuffle(members)
        start = 0
        for i, (name, fraction) in enumerate(fractions.items()):
            end = len(members) if i == len(fractions) - 1 else start + round(fraction * len(members))
            splits[name] += members[start:end]
            start = end
    for rows_of_split in splits.values():
        rng.shuffle(rows_of_split)
    return splits


def class_balance(splits) -> dict:
    """{split: {"examples": N, "classes": {label: count}, "majority_baseline": the accuracy of
    predicting the training set's most frequent class}}."""
    majority = Counter(label for _, label in splits["train"]).most_common(1)[0][0]
    return {name: {"examples": len(rows), "classes": dict(sorted(Counter(label for _, label in rows).items())),
                   "majority_baseline": sum(label == majority for _, label in rows) / max(1, len(rows))}
            for name, rows in splits.items()}
