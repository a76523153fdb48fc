"""The original BERT tokenizer as a Hugging Face `tokenizers` pipeline: the tokenizer files of a
converted model, so that `AutoTokenizer.from_pretrained(DIR)` gives the original's ids.

transformers' own `BertTokenizer` (a `vocab.txt` and `do_lower_case`) reads some real text
differently from the original: it drops private-use characters (U+E000-U+F8FF and the planes
15-16: glyphs of old Chinese encodings that scraped Chinese text is full of), where the original
reads each such word as `[UNK]`; it reads a word of more than 100 characters as `[UNK]` (the
original: 200); it does not split CJK Extension E's first characters (U+2B820-U+2B91F) off; and
it takes punctuation, controls and marks from Unicode tables of another version than Python's.
`tokenizer.json` spells out the original's own steps instead, each character class written out
from this Python's Unicode database (`tokenization.unicode_classes`, as the reference computes it):

  normalizer:    whitespace -> " ", controls removed; with do_lower_case, lower-casing, NFD and
                 the non-spacing marks removed
  pre-tokenizer: each CJK character alone; split on what `str.split()` splits on; each
                 punctuation character alone
  model:         WordPiece, "##" continuations, a word of more than 200 characters is `[UNK]`
  post-processor: [CLS] A [SEP] (B [SEP], type 1)

One difference stays, as Hugging Face users expect it: `[MASK]`, `[CLS]`, ... written in the
text are read as those tokens (the fill-mask pipeline relies on it), where the original splits
them into `[`, `mask`, `]`.

The other way, `vocabulary_beside` makes vocab.txt from a Hugging Face directory's
`tokenizer.json` where it has none (transformers 5 saves a BERT tokenizer as tokenizer.json
alone).
"""

from __future__ import annotations

import json
import os
import types

from bert_realformer import storage
from bert_realformer.errors import InputError
from tokenization import unicode_classes
from tokenization.reference import load_vocab

SPECIAL_TOKENS = types.MappingProxyType({"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                        "cls_token": "[CLS]", "mask_token": "[MASK]"})
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")
MAX_INPUT_CHARS_PER_WORD = 200  # the original WordpieceTokenizer's
# Python's `str.lower()` writes a capital sigma that ends a word as final sigma (Unicode's
# Final_Sigma condition, e.g. ΟΔΟΣ -> οδος); `tokenizers`' Lowercase maps it to σ. So it is
# written as ς before lower-casing: after a cased letter (with at most two case-ignorable
# characters between, such as an apostrophe or a combining accent) and not before one.
FINAL_SIGMA_PATTERN = ("(?<=\\p{Cased}|\\p{Cased}\\p{Case_Ignorable}|\\p{Cased}\\p{Case_Ignorable}{2})\u03a3"
                       "(?!\\p{Case_Ignorable}*\\p{Cased})")


def _replace(pattern: str, content: str) -> dict:
    return {"type": "Replace", "pattern": {"Regex": pattern}, "content": content}


def _split(class_name: str, behavior: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": unicode_classes.re2_class(class_name)}, "behavior": behavior,
            "invert": False}


def pipeline(do_lower_case: bool) -> dict:
    """The normalizer and pre-tokenizer of `tokenizer.json`: the original BasicTokenizer."""
    # (whitespace first: tab, newline and CR are controls to Unicode but spaces to the original)
    classes = unicode_classes.re2_class
    steps = [_replace(classes("whitespace"), " "), _replace(classes("removed"), "")]
    if do_lower_case:
        steps += [_replace(FINAL_SIGMA_PATTERN, "\u03c2"), {"type": "Lowercase"}, {"type": "NFD"},
                  _replace(classes("marks"), "")]
    return {"normalizer": {"type": "Sequence", "normalizers": steps},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                _split("cjk", "Isolated"), _split("split", "Removed"), _split("punctuation", "Isolated")]}}


def tokenizer_json(vocab_file: str, do_lower_case: bool) -> str:
    """`tokenizer.json` (the `tokenizers` format 1.0) for `vocab_file` (ids by line, a later
    duplicate winning, as the original reads it)."""
    vocab = dict(load_vocab(vocab_file))
    missing = [token for token in REQUIRED_TOKENS if token not in vocab]
    if missing:
        raise InputError(f"{vocab_file}: no {', '.join(missing)} (a BERT vocabulary holds "
                         f"{', '.join(REQUIRED_TOKENS)})", options=("vocab_file",))
    special = [token for token in SPECIAL_TOKENS.values() if token in vocab]

    def marker(token, type_id=0):
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def text(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}
    document = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[token], "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for token in special],
        **pipeline(do_lower_case),
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [marker("[CLS]"), text("A", 0), marker("[SEP]")],
            "pair": [marker("[CLS]"), text("A", 0), marker("[SEP]"), text("B", 1), marker("[SEP]", 1)],
            "special_tokens": {token: {"id": token, "ids": [vocab[token]], "tokens": [token]}
                               for token in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": MAX_INPUT_CHARS_PER_WORD, "vocab": vocab}}
    return json.dumps(document, ensure_ascii=False)


def tokenizer_files(vocab_file: str, do_lower_case: bool, max_length: int,
                    token_types: bool = True) -> dict[str, str]:
    """{file name: text} to write beside vocab.txt: `tokenizer.json`, with the configuration that
    makes transformers load it as it is (`PreTrainedTokenizerFast`, giving BERT's inputs with the
    pair's `token_type_ids`, or without them for a model that has no token types, as DistilBERT;
    `do_lower_case` is recorded, the pipeline already applies it)."""
    inputs = ["input_ids", "token_type_ids", "attention_mask"] if token_types else ["input_ids", "attention_mask"]
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": bool(do_lower_case),
              "model_max_length": max_length, "model_input_names": inputs, **SPECIAL_TOKENS}
    return {"tokenizer.json": tokenizer_json(vocab_file, do_lower_case),
            "tokenizer_config.json": json.dumps(config, indent=2),
            "special_tokens_map.json": json.dumps(dict(SPECIAL_TOKENS), indent=2)}


def vocabulary_of(tokenizer_file: str) -> list[str]:
    """The lines of vocab.txt of a Hugging Face `tokenizer.json` whose model is WordPiece: its
    tokens by id. An id no token holds (a duplicate line of the vocab.txt it came from leaves
    one, the later line winning) becomes `[gap ID]`, a line no text tokenizes to (it holds a
    space), so that every token keeps its id."""
    try:
        document = json.loads(storage.read_bytes(tokenizer_file).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{tokenizer_file}: not a tokenizer.json ({error})", options=("input",)) from None
    model = document.get("model") if isinstance(document, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(vocab, dict) or model.get("type") != "WordPiece" or not vocab:
        found = model.get("type") if isinstance(model, dict) else None
        raise InputError(f"{tokenizer_file}: no WordPiece vocabulary (BERT's tokenizer is WordPiece; its model is "
                         f"{found!r}); pass vocab_file", options=("input", "vocab_file"))
    unwritable = [token for token in vocab if token != token.strip() or "\n" in token]
    if unwritable:
        raise InputError(f"{tokenizer_file}: tokens that cannot be lines of vocab.txt (whitespace at an end or "
                         f"inside): {unwritable[:5]!r}", options=("input", "vocab_file"))
    by_id = {index: token for token, index in vocab.items()}
    return [by_id.get(index, f"[gap {index}]") for index in range(max(by_id) + 1)]


def vocabulary_beside(input_dir: str, scratch_dir: str) -> str | None:
    """vocab.txt written into `scratch_dir` from INPUT_DIR/tokenizer.json, where INPUT_DIR has a
    tokenizer.json and no vocab.txt; else None (the vocab.txt beside it is read as it is)."""
    tokenizer_file = os.path.join(input_dir, "tokenizer.json")
    if storage.isfile(os.path.join(input_dir, "vocab.txt")) or not storage.isfile(tokenizer_file):
        return None
    path = os.path.join(scratch_dir, "vocab.txt")
    storage.write_atomic(path, "".join(f"{token}\n" for token in vocabulary_of(tokenizer_file)))
    return path
