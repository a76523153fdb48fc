"""The reference tokenizer: the original BERT tokenizer's steps, behaviour for behaviour
(`tokenization.full.FullTokenizer` puts them together, with a compiled BasicTokenizer).

Pipeline (BasicTokenizer, then WordPiece on each word):
  1. drop NUL, U+FFFD and every Cc/Cf character except tab/newline/CR; turn
     whitespace (space, tab, newline, CR, category Zs) into spaces;
  2. put spaces around every CJK Unified Ideograph;
  3. split on whitespace (Python's `str.split()`, which also splits on U+2028/U+2029);
  4. with `do_lower_case`: `str.lower()`, NFD, delete every non-spacing mark (Mn);
  5. split every punctuation character off (ASCII non-alphanumerics and Unicode P*);
  6. WordPiece: greedy longest match first, `##` for non-initial pieces; a word longer than
     200 code points, or with any part unmatched, becomes one `[UNK]`.
"""

import collections
import re
import unicodedata
from collections.abc import Iterable, Mapping

from bert_realformer import storage

# CJK Unified Ideograph blocks (and the compatibility ideographs), as the original.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))

# Released checkpoints whose casing we know: (do_lower_case expected, names).
_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12")


def convert_to_unicode(text: str | bytes) -> str:
    """`str` as is; `bytes` decoded as UTF-8 (invalid bytes dropped, as the original)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"unsupported string type: {type(text).__name__}")


def vocab_lines(vocab_file: str) -> list[str]:
    """The tokens of `vocab_file` by line (line i holds id i), with the original's reading: lines
    split on '\\n' only, each `.strip()`-ed. A line holding only U+2028 becomes ''."""
    lines = convert_to_unicode(storage.read_bytes(vocab_file)).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the trailing newline ends the last line; it is not a line of its own
    return [line.strip() for line in lines]


def load_vocab(vocab_file: str) -> "collections.OrderedDict[str, int]":
    """{token: id} of `vocab_lines`: the line number as id (a later duplicate wins)."""
    vocab = collections.OrderedDict()
    for index, token in enumerate(vocab_lines(vocab_file)):
        vocab[token] = index
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    return text.split()


def printable_text(text: str | bytes) -> str:
    """Text for printing or logging: `str` as is, `bytes` decoded as UTF-8 (invalid bytes
    dropped), as the original's Python 3 branch."""
    return convert_to_unicode(text)


def convert_by_vocab(vocab: Mapping, items: Iterable) -> list:
    """`[vocab[item] for item in items]` (tokens to ids, or ids to tokens with the inverse)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab: Mapping[str, int], tokens: Iterable[str]) -> list[int]:
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab: Mapping[int, str], ids: Iterable[int]) -> list[str]:
    return convert_by_vocab(inv_vocab, ids)


def is_whitespace(char):
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char):
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


# The original module's private names, which its tests and some users' code call.
_is_whitespace, _is_control, _is_punctuation = is_whitespace, is_control, is_punctuation


class BasicTokenizer:
    """Cleaning, CJK splitting, whitespace and punctuation splitting, optional lower-casing.

    Written character by character like the original: the specification that
    `CompiledBasicTokenizer` (what `FullTokenizer` uses) is tested against.
    """

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str) -> list[str]:
        text = self._clean_text(convert_to_unicode(text))
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = strip_accents(token.lower())
            split_tokens.extend(split_on_punctuation(token))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _clean_text(text):
        out = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or is_control(char):
                continue
            out.append(" " if is_whitespace(char) else char)
        return "".join(out)

    @staticmethod
    def _tokenize_chinese_chars(text):
        return "".join(f" {c} " if is_chinese_char(ord(c)) else c for c in text)


def strip_accents(text):
    """NFD, then delete non-spacing marks."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def split_on_punctuation(text):
    """'a,b' -> ['a', ',', 'b']."""
    words, current = [], []
    for char in text:
        if is_punctuation(char):
            if current:
                words.append("".join(current))
                current = []
            words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece over one vocabulary."""

    def __init__(self, vocab: Mapping[str, int], unk_token: str = "[UNK]", max_input_chars_per_word: int = 200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str) -> list[str]:
        output = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self.tokenize_word(word))
        return output

    def tokenize_word(self, word):
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            piece = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces


def validate_case_matches_checkpoint(do_lower_case: bool, init_checkpoint: str | None) -> None:
    """Raises `ValueError` when `do_lower_case` contradicts a released checkpoint's known casing
    (recognised by its directory name, e.g. `uncased_L-12_H-768_A-12/bert_model.ckpt`)."""
    if not init_checkpoint:
        return
    match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _LOWER_CASED_MODELS and not do_lower_case:
        actual, wanted = "False", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual, wanted = "True", "False"
    else:
        return
    raise ValueError(
        f"--do_lower_case={actual} does not match checkpoint {init_checkpoint}: "
        f"{model_name} was trained with --do_lower_case={wanted}; pass --do_lower_case={wanted}")
