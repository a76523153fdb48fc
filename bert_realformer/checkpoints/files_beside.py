"""A checkpoint's own files, found beside its weights without reading them (and without
TensorFlow): its config, its vocabulary, and whether a vocabulary a user names is its own. The
scripts take `--bert_config_file` and `--vocab_file` from here when a user leaves them out, and
check them before TensorFlow starts.

    own_config_file("all-MiniLM-L6-v2")      # .../config.json (a Hugging Face directory's)
    own_vocab_file("chinese_roberta_wwm_ext/bert_model.ckpt")  # .../vocab.txt (a TF1 release's)
"""

from __future__ import annotations

import os

from bert_realformer import storage
from bert_realformer.checkpoints.formats import CONFIG_FILE, VOCAB_FILE, found_beside, own_vocabulary
from bert_realformer.errors import InputError
from tokenization.reference import vocab_lines

# A TF1 release's or a run's config, then a Hugging Face directory's or a KerasHub preset's.
CONFIG_FILES = (CONFIG_FILE, "config.json")
KERASHUB_VOCABULARY_FILE = "assets/tokenizer/vocabulary.txt"
RELEASE_PREFIX = "bert_model.ckpt"  # the prefix of a TF1 release's weights in its directory


def own_config_file(path: str) -> str | None:
    """The config beside the checkpoint at `path` (a directory or a prefix in one), or None."""
    return next(filter(None, (found_beside(path, name) for name in CONFIG_FILES)), None)


def own_vocab_file(path: str) -> str | None:
    """The vocabulary beside the checkpoint at `path`, or None."""
    return own_vocabulary(path) or found_beside(path, KERASHUB_VOCABULARY_FILE)


def check_vocabulary_belongs(vocab_file: str, init_checkpoint: str, tokens: list[str] | None = None) -> None:
    """An `InputError` when the WordPiece vocabulary beside `init_checkpoint` (a release's, a
    Hugging Face directory's, an extended checkpoint's) is not `tokens` (`vocab_file`'s lines,
    read when not given) or what they begin with: every id would mean another token than the
    model learnt. The old vocabulary of an extended checkpoint begins its own, so it stays
    accepted (the vocabulary check's warning says what it lacks)."""
    own_file = found_beside(init_checkpoint, VOCAB_FILE)
    if own_file is None or own_file == vocab_file:
        return
    tokens = vocab_lines(vocab_file) if tokens is None else tokens
    own = vocab_lines(own_file)
    if tokens == own[:len(tokens)]:
        return
    line = next((number for number, (ours, theirs) in enumerate(zip(tokens, own), 1) if ours != theirs),
                min(len(tokens), len(own)) + 1)
    ours = repr(tokens[line - 1]) if line <= len(tokens) else "no line"
    theirs = repr(own[line - 1]) if line <= len(own) else "no line"
    raise InputError(f"vocab_file={vocab_file} is not the vocabulary of init_checkpoint={init_checkpoint}: "
                     f"line {line} is {ours} there and {theirs} in its own {own_file}, so the ids would mean "
                     "other tokens than the model learnt; use its vocabulary (or allow_foreign_vocab for a "
                     "deliberate change)", options=("vocab_file", "init_checkpoint", "allow_foreign_vocab"))


def release_prefix(path: str) -> str | None:
    """The TF1 checkpoint prefix `path` names plainly: a prefix with its index beside it, or a
    release's directory holding `bert_model.ckpt.index`; None for anything else (a run, another
    format)."""
    if storage.isdir(path):
        path = os.path.join(path, RELEASE_PREFIX)
    return path if storage.isfile(path + ".index") else None

