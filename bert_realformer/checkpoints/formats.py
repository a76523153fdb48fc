"""The contract every weight format implements (`WeightFormat`: read, write, the format's names
of the TF1 names) and their registry. The formats of the project register themselves in their
modules (`tf1`, `training_states` as `ours`, `huggingface` as `hf`, `kerashub`); a new format is
one module of this package with one `@register` class, found by `get` without other changes.

    weights = formats.get("hf").read("hf_model_dir", ReadOptions(target="tf1"))
    written = formats.get("tf1").write("out_dir", weights, WriteOptions())

Weights travel between formats under the original TF1 names (`Weights.values`), with the config,
the vocabulary and a classifier's labels in their order.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import json
import os
import pkgutil
from typing import TYPE_CHECKING, ClassVar

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_lines, read_text

if TYPE_CHECKING:  # annotations only
    import numpy as np

    import modeling

LABELS_FILE = "label_list.txt"  # a classifier run's label order, one per line
RUN_OPTIONS_FILE = "training_options.json"  # what a run was started with (`training.recorded_options`)
VOCAB_FILE = "vocab.txt"
# A model directory's vocabulary, by the tokenizer's kind: WordPiece's, ALBERT's SentencePiece
# model, RoBERTa's byte-level BPE (with merges.txt beside it; `tokenization.vocabularies`).
VOCABULARY_FILES = (VOCAB_FILE, "spiece.model", "vocab.json")
CONFIG_FILE = "bert_config.json"
# A run's directories of weights whose config, vocabulary and labels the run keeps beside them:
# its training state (`training_states.TRAINING_STATE`) and its best checkpoint
# (`finetuning.best_checkpoint`).
RUN_WEIGHT_DIRECTORIES = ("training_state", "best")
# The best checkpoint's record in `best/`, {"step": N, ...}: the one word on which of the
# directory's model.ckpt-N is the best (a kill while a new best is written leaves two).
BEST_RECORD = "best.json"


@dataclasses.dataclass
class Weights:
    """What a conversion carries: the config, {TF1 name: array}, the vocabulary file (or None),
    a classifier's labels in their order (or None), whether it is a multi-label classifier (a
    sigmoid per label) and notes on what was left out."""
    config: modeling.BertConfig
    values: dict[str, np.ndarray]
    vocab_file: str | None = None
    labels: list[str] | None = None
    multi_label: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """config_file, vocab_file: where they are when not beside the weights; force: read what the
    target cannot hold (listed in `Weights.notes`) instead of refusing; target: the format the
    weights go to (a format may refuse what that target cannot take); scratch_dir: a directory
    the caller removes once the weights are written, for files a format makes while reading
    (vocab.txt from a Hugging Face tokenizer.json)."""
    config_file: str | None = None
    vocab_file: str | None = None
    force: bool = False
    target: str | None = None
    scratch_dir: str | None = None


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """The tokenizer's casing and length for formats that carry one; force: write without the
    weights the format has no place for (noted) instead of refusing."""
    do_lower_case: bool = True
    max_seq_length: int = 128
    force: bool = False


class WeightFormat(abc.ABC):
    """A weight format: what `--from`/`--to` call it (`name`), reading a path into `Weights`,
    writing `Weights` into a directory, and its own names of the TF1 names."""

    name: ClassVar[str]
    # The files that make a directory this format's (none: the format is found otherwise, as a
    # checkpoint prefix is), and what a user calls it.
    marker_files: ClassVar[tuple[str, ...]] = ()
    title: ClassVar[str] = ""

    @abc.abstractmethod
    def read(self, path: str, options: ReadOptions) -> Weights:
        """The weights at `path`; an `InputError` names what is missing or wrong."""

    @abc.abstractmethod
    def write(self, directory: str, weights: Weights, options: WriteOptions) -> list[str]:
        """Writes `weights` into `directory`; returns what was written, for the user. What the
        format has no place for is refused unless `options.force` (then noted in `weights.notes`)."""

    @abc.abstractmethod
    def names(self, config: modeling.BertConfig) -> dict[str, str]:
        """{TF1 name: this format's name} of the encoder's weights under `config`."""


# name -> format class. Written only by `register` (at the import of a format module), read by `get`.
FORMATS: dict[str, type[WeightFormat]] = {}


def register(format_class: type[WeightFormat]) -> type[WeightFormat]:
    """A class decorator registering a `WeightFormat` under its `name` (a name is taken once)."""
    if FORMATS.get(format_class.name, format_class) is not format_class:
        raise ValueError(f"a weight format named {format_class.name!r} is registered already")
    FORMATS[format_class.name] = format_class
    return format_class


def get(name: str) -> WeightFormat:
    """The format registered as `name`; an `InputError` naming the known ones else."""
    _import_formats()
    if name not in FORMATS:
        raise InputError(f"unknown weight format {name!r}; expected one of {', '.join(known())}")
    return FORMATS[name]()


def holding(path: str) -> str | None:
    """The name of the format whose `marker_files` directory `path` is (a Hugging Face model,
    a KerasHub preset), or None."""
    if not storage.isdir(path):
        return None
    storage.check_readable_dir(path)  # (unreadable: said, not "holds no checkpoint")
    _import_formats()
    return next((name for name, format_class in sorted(FORMATS.items()) if format_class.marker_files
                 and all(storage.isfile(os.path.join(path, file)) for file in format_class.marker_files)), None)


def known() -> list[str]:
    """The names of the registered formats."""
    _import_formats()
    return sorted(FORMATS)


def _import_formats():
    """Imports every module of this package once, so that their formats register."""
    package = __name__.rsplit(".", 1)[0]
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{info.name}")


# ------------------------------------------------------------------ files beside the weights
def checkpoint_exists(path: str) -> bool:
    """Whether `path` is there as a checkpoint may be named: a file or directory, or a prefix with
    its index beside it."""
    return storage.exists(path) or storage.exists(path + ".index")


def found_beside(path: str, name: str) -> str | None:
    """File `name` in the directory of `path` (a directory, or a checkpoint prefix in one); for
    a run's `training_state` or `best` directory, in the run directory where the run keeps its
    files."""
    directory = (path if storage.isdir(path) else os.path.dirname(path)).rstrip("/")
    directories = [directory]
    if os.path.basename(directory) in RUN_WEIGHT_DIRECTORIES:
        directories.append(os.path.dirname(directory))
    for candidate in (os.path.join(d, name) for d in directories):
        if storage.isfile(candidate):  # (one look per place: each may be a remote call)
            return candidate
    return None


def read_labels(path: str) -> list[str]:
    """A label order file (`LABELS_FILE`): one label per line, blank lines skipped."""
    return [line.rstrip("\r\n") for _, line in read_lines(path) if line.strip()]


def labels_text(labels: list[str]) -> str:
    """The content of a label order file."""
    return "".join(f"{label}\n" for label in labels)


def labels_beside(path: str) -> list[str] | None:
    """A classifier run's label order kept beside its weights (`LABELS_FILE`), or None."""
    labels_file = found_beside(path, LABELS_FILE)
    return read_labels(labels_file) if labels_file else None


def multi_label_beside(path: str) -> bool:
    """Whether the run that keeps the weights at `path` trained a multi-label classifier (its
    `RUN_OPTIONS_FILE` says so)."""
    options_file = found_beside(path, RUN_OPTIONS_FILE)
    if options_file is None:
        return False
    try:
        options = json.loads(read_text(options_file))
    except ValueError:
        return False  # (the run's own reading of the file names what is wrong with it)
    return isinstance(options, dict) and bool((options.get("classifier_input") or {}).get("multi_label"))


def vocabulary_files(vocab_file: str) -> dict[str, str]:
    """{name in a model directory: source} of the files that make `vocab_file`'s tokenizer, named
    as a directory of its kind keeps them (`VOCABULARY_FILES`): a WordPiece `vocab.txt`, ALBERT's
    `spiece.model`, RoBERTa's `vocab.json` with the `merges.txt` beside it."""
    # (told apart by name, as `tokenization.vocabularies.vocabulary_kind` does: this module is
    # below the tokenizers in the import order of `bert_realformer.from_pretrained`)
    if vocab_file.endswith(".model"):
        return {"spiece.model": vocab_file}
    if vocab_file.endswith(".json"):
        return {"vocab.json": vocab_file, "merges.txt": os.path.join(os.path.dirname(vocab_file), "merges.txt")}
    return {VOCAB_FILE: vocab_file}


def own_vocabulary(path: str) -> str | None:
    """The vocabulary kept beside the weights at `path` (`found_beside`), of any kind, or None."""
    return next(filter(None, (found_beside(path, name) for name in VOCABULARY_FILES)), None)


def write_vocab_and_labels(directory: str, weights: Weights) -> list[str]:
    """The vocabulary (its files, as its kind names them) and the label order written beside
    weights; returns the names written."""
    written = []
    if weights.vocab_file:
        for name, source in vocabulary_files(weights.vocab_file).items():
            storage.write_atomic(os.path.join(directory, name), storage.read_bytes(source))
            written.append(name)
    if weights.labels:
        storage.write_atomic(os.path.join(directory, LABELS_FILE), labels_text(weights.labels))
        written.append(LABELS_FILE)
    return written


def refuse_unless_forced(weights: Weights, force: bool, message: str, forced_note: str, names: list[str],
                         options: tuple[str, ...] = ()) -> None:
    """An `InputError` with `message` (naming `options`) unless `force`; then a note on what was
    left out."""
    if not force:
        raise InputError(f"{message}; pass force to convert without them", options=(*options, "force"))
    weights.notes.append(f"{forced_note}: {', '.join(names)}")


def name_list(names, limit=6):
    """'a, b, c and 4 more' for messages."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
