"""NER data in CoNLL column format, tag schemes, and the prediction files conlleval reads.

A file has one token per line with its tag in the last whitespace-separated column, blank
lines between sentences, `-DOCSTART-` lines between documents (skipped). Chinese NER files
have one character per line. Tags are `O` or `B-`/`I-`/`E-`/`S-` + a type: IOB2 (BIO) and
BIOES are kept as they are; IOB1 (CoNLL-2003 as released, where I- starts a chunk and B-
only separates two adjacent chunks of one type) is converted to IOB2 on reading. Every error
names the file and line.

Tasks (`--task_name`): `generic` (labels from the training file), and `conll2003`, `msra`,
`peoples_daily`, which fix the file names and the entity types.
"""

from __future__ import annotations

import dataclasses
import os
import types

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

DOCSTART = "-DOCSTART-"
PREFIXES = ("B", "I", "E", "S")


@dataclasses.dataclass
class Sentence:
    """Tokens, tags (None for a file without a tag column) and where they came from."""
    tokens: list
    tags: list | None
    lines: list           # the file's line number of each token
    path: str


@dataclasses.dataclass
class ConllFile:
    """A file's sentences and its lines as read (for writing predictions beside them)."""
    path: str
    sentences: list
    lines: list           # every line of the file, without its end of line


def _check_tag(tag, path, number):
    if tag != "O" and (tag.count("-") < 1 or tag.split("-", 1)[0] not in PREFIXES
                       or not tag.split("-", 1)[1]):
        raise InputError(f"{path}:{number}: tag {tag!r} is not O or B-/I-/E-/S-<type>")


def iob1_to_iob2(tags):
    """An I-X that does not continue a chunk of X becomes B-X (IOB2 is left unchanged)."""
    out, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def read_conll(path: str, tagged: bool = True) -> list[Sentence]:
    """Reads a CoNLL file. `tagged`: every token line must end with a tag column (a file with
    one column is then an error); else a one-column file is read as untagged tokens."""
    if not storage.isfile(path):
        raise InputError(f"{path}: no such file")
    raw = read_text(path).splitlines()
    sentences, tokens, tags, numbers = [], [], [], []
    columns = None

    def flush():
        if tokens:
            has_tags = columns is not None and columns > 1
            converted = iob1_to_iob2(tags) if has_tags and not any(t[:2] in ("E-", "S-") for t in tags) else tags
            sentences.append(Sentence(list(tokens), converted if has_tags else None, list(numbers), path))
        tokens.clear()
        tags.clear()
        numbers.clear()

    for number, line in enumerate(raw, start=1):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            flush()
            continue
        if columns is None:
            columns = len(fields)
            if tagged and columns < 2:
                raise InputError(f"{path}:{number}: expected a token and its tag, found one column")
        elif len(fields) != columns:
            raise InputError(f"{path}:{number}: {len(fields)} columns where the file's first token "
                             f"line has {columns}")
        tokens.append(fields[0])
        numbers.append(number)
        if columns > 1:
            _check_tag(fields[-1], path, number)
            tags.append(fields[-1])
    flush()
    if not sentences:
        raise InputError(f"{path}: no tokens")
    return ConllFile(path, sentences, raw)


# ---------------------------------------------------------------------------- tasks
NAMED_TASKS = types.MappingProxyType({
    # task: (entity types, {split: file names tried in order})
    "conll2003": (("PER", "LOC", "ORG", "MISC"),
                  {"train": ("train.txt", "eng.train"), "dev": ("dev.txt", "valid.txt", "eng.testa"),
                   "test": ("test.txt", "eng.testb")}),
    "msra": (("PER", "LOC", "ORG"), {"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}),
    "peoples_daily": (("PER", "LOC", "ORG"),
                      {"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}),
})
GENERIC_FILES = types.MappingProxyType({"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)})


def task_files(task_name):
    if task_name == "generic":
        return GENERIC_FILES
    if task_name not in NAMED_TASKS:
        raise InputError(f"task_name={task_name}: unknown task; known tasks: generic, "
                         + ", ".join(sorted(NAMED_TASKS)), options=("task_name",))
    return NAMED_TASKS[task_name][1]


def data_path(data_dir, task_name, split):
    """The split's file: the first of the task's names that exists (an error naming them)."""
    names = task_files(task_name)[split]
    for name in names:
        path = os.path.join(data_dir, name)
        if storage.isfile(path):
            return path
    raise InputError(f"{os.path.join(data_dir, names[0])}: no such file"
                     + (f" (nor {', '.join(names[1:])})" if len(names) > 1 else ""))


def bio_labels(types):
    """`O`, then B- and I- of each type in order."""
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def labels_for(task_name, train_file):
    """The label list: the named task's BIO tags (BIOES if the training file uses E-/S-), or
    for `generic` the training file's tags (`O` first, then sorted)."""
    seen = {tag for sentence in train_file.sentences for tag in sentence.tags}
    if task_name == "generic":
        return ["O"] + sorted(seen - {"O"})
    types = NAMED_TASKS[task_name][0]
    if any(tag[:2] in ("E-", "S-") for tag in seen):
        return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in PREFIXES]
    return bio_labels(types)


def check_labels(conll_file, labels, role="the training file"):
    """Every tag of the file must be a label (one-line error naming file and line)."""
    known = set(labels)
    for sentence in conll_file.sentences:
        if sentence.tags is None:
            continue
        for tag, number in zip(sentence.tags, sentence.lines, strict=True):
            if tag not in known:
                raise InputError(f"{sentence.path}:{number}: tag {tag!r} is not in {role}'s tags "
                                 f"({', '.join(labels)})")


def write_predictions(conll_file, predicted, path):
    """Every line of `conll_file` in order, each token line with its predicted tag appended as
    a new last column, after the line's own delimiter (a tab where the line has tabs, else a
    space), `-DOCSTART-` lines get `O`, blank lines stay blank: conlleval's input (with
    `-d '\t'` for tab-separated files).
    `predicted` holds one tag list per sentence. Written under a temporary name and renamed."""
    tag_of_line = {}
    for sentence, tags in zip(conll_file.sentences, predicted, strict=True):
        tag_of_line.update(zip(sentence.lines, tags, strict=True))
    with storage.atomic_output(path) as f:
        for number, line in enumerate(conll_file.lines, start=1):
            line = line.rstrip()
            if not line:
                f.write("\n")
                continue
            delimiter = "\t" if "\t" in line else " "  # the line's own: conlleval needs one kind per line
            f.write(f"{line}{delimiter}{tag_of_line.get(number, 'O')}\n")  # -DOCSTART- lines get O
