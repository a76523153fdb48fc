"""Growing a released checkpoint's vocabulary with a domain's tokens (what
`extend_vocabulary.py` runs).

    tokens = read_new_tokens("finance_terms.txt")
    plan = plan_extension(tokens, "vocab.txt", do_lower_case=True)   # checks, writes nothing
    values = extended_weights(plan, read_tf1_checkpoint("bert_model.ckpt"))
    write_extension(plan, values, "bert_config.json", "out/")

New tokens are appended to the vocabulary in file order (ids continue after the last line), so
every existing id keeps its meaning. Two weights have a row per token and grow:
`bert/embeddings/word_embeddings` [V, H] (also the tied MLM output) and
`cls/predictions/output_bias` [V]. A new token's row (and bias) is the mean of the rows of the
pieces the old vocabulary cuts it into (`稳定币` is not one token, `blockchain` -> `block`,
`##chain`); a token the old vocabulary could only call `[UNK]` (the curly quotes of the Chinese
vocabulary) starts from `[UNK]`'s row: what the model has seen for it so far. Every other
weight, and every existing row, is unchanged bit for bit.

A token can only be added if the tokenizer would ever produce it whole: the basic tokenizer
(lower-casing and accent stripping with `do_lower_case`, splitting at punctuation and around
every CJK character) must leave it as it is. A Chinese word of several characters cannot
be one token for that reason; such a line is refused before anything is written.
"""

import dataclasses
import json
import os

import numpy as np

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

EMBEDDINGS = "bert/embeddings/word_embeddings"
OUTPUT_BIAS = "cls/predictions/output_bias"
UNKNOWN = "[UNK]"


@dataclasses.dataclass
class ExtensionPlan:
    """What the extension will add: `added` tokens in order with the old vocabulary's pieces
    for each (`[UNK]` alone: starts from [UNK]'s row); `skipped`: already in the vocabulary
    (or repeated in the file)."""
    vocab_file: str
    old_size: int
    unknown_id: int
    added: list[str]
    pieces: dict[str, list[int]]
    skipped: list[str]

    @property
    def unknown(self) -> list[str]:
        """Added tokens that the old vocabulary could only call [UNK]."""
        return [t for t in self.added if self.pieces[t] == [self.unknown_id]]


def read_new_tokens(path: str) -> list[tuple[int, str]]:
    """(line number, token) of a file with one token per line; blank lines are skipped, the
    line's surrounding whitespace is not part of the token. A token with whitespace inside, or
    a file with no token, stops with one line naming the file (and line)."""
    if not storage.isfile(path):
        raise InputError(f"new_tokens={path}: no such file", options=("new_tokens",))
    tokens = []
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        token = line.strip()
        if not token:
            continue
        if any(c.isspace() for c in token):
            raise InputError(f"{path}:{number}: {token!r} holds whitespace; a token is one line without spaces")
        tokens.append((number, token))
    if not tokens:
        raise InputError(f"new_tokens={path}: holds no token (one token per line)", options=("new_tokens",))
    return tokens


def _why_not_whole(token, basic):
    """Why the tokenizer would never produce `token` as one token, or None."""
    from tokenization.reference import is_chinese_char
    if token.startswith("##"):
        return "continuation pieces (##...) cannot be added; give the whole word"
    if sum(is_chinese_char(ord(c)) for c in token) and len(token) > 1:
        return ("the tokenizer splits every CJK character, so a Chinese word of several characters never "
                "reaches the vocabulary whole (whole-word masking groups its characters without it)")
    seen = basic.tokenize(token)
    if len(seen) > 1:
        return f"the tokenizer splits it into {' '.join(seen)} (at punctuation or CJK characters)"
    if seen != [token]:
        return f"the tokenizer sees it as {seen[0]!r} (do_lower_case lower-cases and strips accents); give that"
    return None


def plan_extension(tokens: list[tuple[int, str]], vocab_file: str, do_lower_case: bool,
                   new_tokens_file: str = "new_tokens") -> ExtensionPlan:
    """Checks every token (one line naming the first refused one) and finds each new token's
    pieces in the old vocabulary."""
    from tokenization.reference import BasicTokenizer, WordpieceTokenizer, load_vocab
    if not storage.isfile(vocab_file):
        raise InputError(f"vocab_file={vocab_file}: no such file", options=("vocab_file",))
    vocab = load_vocab(vocab_file)
    if UNKNOWN not in vocab:
        raise InputError(f"vocab_file={vocab_file}: has no {UNKNOWN} token", options=("vocab_file",))
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    for number, token in tokens:
        why = _why_not_whole(token, basic)
        if why:
            raise InputError(f"{new_tokens_file}:{number}: {token!r} cannot be one token: {why}",
                             options=("do_lower_case",))
    wordpiece = WordpieceTokenizer(vocab)
    added, skipped, pieces = [], [], {}
    for _, token in tokens:
        if token in vocab or token in pieces:
            skipped.append(token)
            continue
        added.append(token)
        pieces[token] = [vocab[p] for p in wordpiece.tokenize(token)]
    return ExtensionPlan(vocab_file, len(vocab), vocab[UNKNOWN], added, pieces, skipped)


def extended_weights(plan: ExtensionPlan, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{TF1 name: array} with the token-sized weights grown by the new rows (see the module
    docstring); the other arrays are the same objects."""
    if EMBEDDINGS not in values:
        raise InputError(f"init_checkpoint holds no {EMBEDDINGS}: not a BERT checkpoint", options=("init_checkpoint",))
    rows = values[EMBEDDINGS].shape[0]
    if rows != plan.old_size:
        raise InputError(f"init_checkpoint has {rows} word embeddings but vocab_file={plan.vocab_file} has "
                         f"{plan.old_size} lines: new ids would not follow the old ones",
                         options=("init_checkpoint", "vocab_file"))
    out = dict(values)
    for name in (EMBEDDINGS, OUTPUT_BIAS):
        if name in values:
            old = values[name]
            new = np.stack([old[plan.pieces[t]].mean(axis=0, dtype=np.float64).astype(old.dtype)
                            for t in plan.added]) if plan.added else old[:0]
            out[name] = np.concatenate([old, new])
    return out


def write_extension(plan: ExtensionPlan, values: dict[str, np.ndarray], config: dict, output_dir: str) -> None:
    """OUTPUT_DIR/vocab.txt (the old lines, then the new tokens), bert_config.json (`config`, the
    checkpoint's, with the new vocab_size, every other key kept) and bert_model.ckpt (the
    released layout)."""
    from bert_realformer.checkpoints import write_tf1_checkpoint
    if config.get("vocab_size") != plan.old_size:
        raise InputError(f"bert_config_file says vocab_size {config.get('vocab_size')} but "
                         f"vocab_file={plan.vocab_file} has {plan.old_size} lines",
                         options=("bert_config_file", "vocab_file"))
    config = {**config, "vocab_size": plan.old_size + len(plan.added)}
    old_vocab = read_text(plan.vocab_file)
    if old_vocab and not old_vocab.endswith("\n"):
        old_vocab += "\n"
    storage.makedirs(output_dir)
    write_tf1_checkpoint(values, os.path.join(output_dir, "bert_model.ckpt"))
    storage.write_atomic(os.path.join(output_dir, "vocab.txt"), old_vocab + "".join(t + "\n" for t in plan.added))
    storage.write_atomic(os.path.join(output_dir, "bert_config.json"), json.dumps(config, indent=2) + "\n")
