"""RoBERTa's and GPT-2's byte-level BPE (`vocab.json` + `merges.txt`), in pure Python.

A text is cut into pieces (`pieces`: a contraction, a run of letters, of digits or of other
symbols, each with the space before it, or a run of white space), each piece's UTF-8 bytes are
written as printable characters (`byte_characters`: every byte one character, so that any text has
tokens and none is unknown), and the merges, in the order `merges.txt` lists them, join the
characters of each piece into vocabulary tokens. A token starting with `Ġ` (the byte 0x20) holds
the space before a word.

    tokenizer = ByteLevelBPETokenizer("vocab.json", "merges.txt")
    tokens = tokenizer.tokenize("Hello world")        # ['Hello', 'Ġworld']
    ids = tokenizer.convert_tokens_to_ids(tokens)

The pieces' letter and digit classes come from this Python's `unicodedata` (Unicode's L* and N*
categories), the white space from Unicode's White_Space property, as the Rust `tokenizers`
library cuts them.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata

from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

# Unicode's White_Space property (PropList.txt), what `\s` means to the Rust regex engines.
WHITE_SPACE = (*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
               0x205F, 0x3000)


@functools.cache
def byte_characters() -> tuple[str, ...]:
    """The character each byte 0-255 is written as: the printable Latin-1 bytes (`!`-`~`,
    `¡`-`¬`, `®`-`ÿ`) as themselves, the others as U+0100 onwards in byte order (0x20 -> `Ġ`)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    characters, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            characters[byte] = chr(byte)
        else:
            characters[byte] = chr(256 + extra)
            extra += 1
    return tuple(characters[byte] for byte in range(256))


def _class(code_points) -> str:
    """A `re` character class body of sorted code points, as ranges."""
    parts, points = [], sorted(code_points)
    start = previous = points[0]
    for point in [*points[1:], None]:
        if point is not None and point == previous + 1:
            previous = point
            continue
        parts.append(re.escape(chr(start)) + ("" if start == previous else "-" + re.escape(chr(previous))))
        if point is not None:
            start = previous = point
    return "".join(parts)


@functools.cache
def _pieces_pattern() -> re.Pattern:
    """GPT-2's pre-tokenizer: `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`."""
    letters, digits = [], []
    for point in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(point))
        if category[0] == "L":
            letters.append(point)
        elif category[0] == "N":
            digits.append(point)
    letter, digit, space = _class(letters), _class(digits), _class(WHITE_SPACE)
    return re.compile(f"'s|'t|'re|'ve|'m|'ll|'d| ?[{letter}]+| ?[{digit}]+| ?[^{space}{letter}{digit}]+"
                      f"|[{space}]+(?![^{space}])|[{space}]+")


def pieces(text: str) -> list[str]:
    """`text` cut as GPT-2's pre-tokenizer cuts it (the module docstring)."""
    return _pieces_pattern().findall(text)


def _read_vocabulary(vocab_file: str) -> dict[str, int]:
    """vocab.json's {token: id}; a file that is not one is an `InputError` naming it."""
    try:
        vocab = json.loads(read_text(vocab_file))
    except ValueError as error:
        raise InputError(f"{vocab_file}: expected a byte-level BPE vocabulary, a JSON object of token: id "
                         f"({error}); truncated?") from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise InputError(f"{vocab_file}: expected a byte-level BPE vocabulary, a JSON object of token: id")
    return vocab


class ByteLevelBPETokenizer:
    """The tokens and ids of a byte-level BPE vocabulary (`vocab_file`: vocab.json, token -> id;
    `merges_file`: merges.txt, one `left right` pair per line in rank order after an optional
    `#version` line). `add_prefix_space`: a space before the text, as a word inside a sentence
    (RoBERTa's default: False). The special tokens are RoBERTa's (`<s>` begins a sequence where
    BERT has `[CLS]`, `</s>` ends a segment; two of them stand between the texts of a pair)."""
    cls_token, sep_token, mask_token, unk_token = "<s>", "</s>", "<mask>", "<unk>"
    pair_separator = ("</s>", "</s>")

    def __init__(self, vocab_file: str, merges_file: str, add_prefix_space: bool = False):
        self.vocab_file, self.do_lower_case = vocab_file, False
        self.vocab = _read_vocabulary(vocab_file)
        lines = read_text(merges_file).splitlines()
        if lines and lines[0].startswith("#version"):
            lines = lines[1:]
        self.ranks = {tuple(line.split(" ")): rank for rank, line in enumerate(lines) if line}
        self.inverse = {index: token for token, index in self.vocab.items()}
        self.add_prefix_space = add_prefix_space
        self._cache: dict[str, list[str]] = {}

    def _merged(self, piece: str) -> list[str]:
        """The tokens of one piece (its bytes as characters): the best-ranked adjacent pair,
        every occurrence left to right, merged until no pair of the merges is left."""
        if piece in self._cache:
            return self._cache[piece]
        parts = list(piece)
        while len(parts) > 1:
            best = min(zip(parts, parts[1:]), key=lambda pair: self.ranks.get(pair, sys.maxsize))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        self._cache[piece] = parts
        return parts

    def tokenize(self, text: str) -> list[str]:
        """The tokens of `text` (no special tokens added)."""
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        characters = byte_characters()
        return [token for piece in pieces(text)
                for token in self._merged("".join(characters[byte] for byte in piece.encode("utf-8")))]

    def tokenize_word(self, word: str) -> list[str]:
        """The tokens of one word of a sentence split into words: with the space before it (as
        transformers tokenizes words given one by one, `add_prefix_space`)."""
        return self.tokenize(word if word.startswith(" ") else " " + word)

    def tokenize_to_ids(self, text: str) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        return [self.vocab[token] for token in tokens]

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.inverse[index] for index in ids]

    def decode(self, tokens: list[str]) -> str:
        """The text of `tokens` (their characters back to bytes, read as UTF-8: the space before a
        word kept)."""
        byte_of = {character: byte for byte, character in enumerate(byte_characters())}
        return bytes(byte_of[character] for token in tokens for character in token).decode("utf-8", "replace")
