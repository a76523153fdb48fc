"""The tokenizer a vocabulary file names: BERT's WordPiece (`vocab.txt`), ALBERT's SentencePiece
(`spiece.model`, or any `*.model`) or RoBERTa's byte-level BPE (`vocab.json`, its `merges.txt`
beside it), so that `--vocab_file` may name any of them.

    tokenizer = tokenizer_for("albert/spiece.model", do_lower_case=True)
    ids = tokenizer.tokenize_to_ids("Hello world")
    cls_id = tokenizer.vocab[tokenizer.cls_token]

Every tokenizer has `vocab` ({token: id}), `tokenize`, `tokenize_to_ids`,
`convert_tokens_to_ids`, `convert_ids_to_tokens`, its special tokens' names (`cls_token`,
`sep_token`, `mask_token`, `unk_token`), `pair_separator` (the tokens between the texts of a pair:
`[SEP]`, RoBERTa's `</s> </s>`), `tokenize_word` (one word of a sentence given as words) and
`decode` (the text of tokens).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bert_realformer import storage
from bert_realformer.errors import InputError

if TYPE_CHECKING:
    from tokenization.byte_level_bpe import ByteLevelBPETokenizer
    from tokenization.fast import FastTokenizer
    from tokenization.full import FullTokenizer
    from tokenization.sentence_piece import GraphSentencePiece, SentencePieceTokenizer

    Tokenizer = FullTokenizer | SentencePieceTokenizer | ByteLevelBPETokenizer
    GraphTokenizer = FastTokenizer | GraphSentencePiece


def vocabulary_kind(vocab_file: str) -> str:
    """`sentencepiece` for a `*.model` file, `bpe` for a `*.json` one, else `wordpiece`."""
    if vocab_file.endswith(".model"):
        return "sentencepiece"
    return "bpe" if vocab_file.endswith(".json") else "wordpiece"


def tokenizer_for(vocab_file: str, do_lower_case: bool = True, option: str = "vocab_file") -> Tokenizer:
    """The tokenizer of `vocab_file` (see the module docstring). A BPE vocabulary without its
    merges beside it is an `InputError` naming `option`."""
    from tokenization.byte_level_bpe import ByteLevelBPETokenizer
    from tokenization.full import FullTokenizer
    from tokenization.sentence_piece import SentencePieceTokenizer
    kind = vocabulary_kind(vocab_file)
    if kind == "sentencepiece":
        return SentencePieceTokenizer(vocab_file, do_lower_case=do_lower_case)
    if kind == "bpe":
        merges = os.path.join(os.path.dirname(vocab_file), "merges.txt")
        if not storage.isfile(merges):
            raise InputError(f"{option}={vocab_file}: a byte-level BPE vocabulary needs its merges.txt beside it "
                             f"({merges} is missing)", options=(option,))
        return ByteLevelBPETokenizer(vocab_file, merges)
    return FullTokenizer(vocab_file, do_lower_case=do_lower_case)


def has_graph_tokenizer(vocab_file: str) -> bool:
    """Whether `vocab_file`'s tokenizer has a form in TensorFlow ops (`graph_tokenizer_for`):
    WordPiece's and SentencePiece's do, byte-level BPE's does not."""
    return vocabulary_kind(vocab_file) != "bpe"


def graph_tokenizer_for(vocab_file: str, do_lower_case: bool = True, option: str = "vocab_file") -> GraphTokenizer:
    """The tokenizer of `vocab_file` in TensorFlow ops (`tokenize(texts [N]) -> int64 ragged [N,
    (tokens)]`, the same ids as `tokenizer_for`'s), for a SavedModel that takes raw text:
    WordPiece's (`tokenization.fast`) or SentencePiece's (tensorflow-text's op). Byte-level BPE
    has no TensorFlow op: an `InputError` naming `option`."""
    if not has_graph_tokenizer(vocab_file):
        raise InputError(f"{option}={vocab_file}: byte-level BPE has no TensorFlow op, so a SavedModel cannot "
                         "tokenize text with it; serve token ids instead (the Keras model's export(), docs/keras.md)",
                         options=(option,))
    if vocabulary_kind(vocab_file) == "sentencepiece":
        from tokenization.sentence_piece import GraphSentencePiece
        return GraphSentencePiece(vocab_file, do_lower_case=do_lower_case)
    from tokenization.fast import FastTokenizer
    return FastTokenizer(vocab_file, do_lower_case=do_lower_case)
