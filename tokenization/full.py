"""The tokenizer the project uses: the original's `FullTokenizer` (BasicTokenizer then
WordPiece) with a compiled BasicTokenizer of the same output (`tokenization.reference` holds
the original's step-by-step one, which the tests compare it with)."""

import re
import unicodedata
from collections.abc import Iterable

from tokenization import unicode_classes as uc
from tokenization.reference import (
    BasicTokenizer,
    WordpieceTokenizer,
    convert_by_vocab,
    convert_to_unicode,
    load_vocab,
)


class CompiledBasicTokenizer(BasicTokenizer):
    """`BasicTokenizer` with the same output, several times faster: cleaning is one
    `str.translate`, lower-casing runs over the whole line, and one compiled regex finds the
    words: a punctuation character, a CJK character, or a run of anything else but whitespace.

    Whole-line lower-casing equals the original's per-word lower-casing because whitespace
    ends the context of Python's final-sigma rule; NFD and mark deletion are per character, and
    NFD maps CJK compatibility ideographs only to (equally split) unified ideographs.
    """

    def __init__(self, do_lower_case: bool = True):
        super().__init__(do_lower_case)
        sets = uc.code_points()
        self._clean = dict.fromkeys(sets["removed"])
        self._clean.update(dict.fromkeys(sets["whitespace"], " "))
        self._marks = dict.fromkeys(sets["marks"])
        single = uc.python_class("punctuation", "cjk")
        others = uc.python_class("punctuation", "cjk", negate=True, extra=r"\s")
        self._words = re.compile(f"{single}|{others}+")

    def tokenize(self, text: str) -> list[str]:
        text = convert_to_unicode(text).translate(self._clean)
        if self.do_lower_case:
            text = unicodedata.normalize("NFD", text.lower()).translate(self._marks)
        return self._words.findall(text)


def join_wordpieces(tokens: list[str]) -> str:
    """The text of WordPieces as the original's SQuAD answers join them: `##` pieces joined to the
    piece before, the others apart."""
    return " ".join(" ".join(tokens).replace(" ##", "").replace("##", "").strip().split())


class FullTokenizer:
    """`FullTokenizer(vocab_file=..., do_lower_case=...)`: BasicTokenizer then WordPiece.

    WordPiece results are cached per word (same output; real text repeats words a lot).
    `tokenize_to_ids` goes straight to ids. The special tokens' names are attributes, as every
    tokenizer of `tokenization.vocabularies` has them.
    """
    cls_token, sep_token, mask_token, unk_token = "[CLS]", "[SEP]", "[MASK]", "[UNK]"
    pair_separator = ("[SEP]",)

    def __init__(self, vocab_file: str, do_lower_case: bool = True):
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = CompiledBasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self._piece_cache = {}
        self._id_cache = {}

    def _cached(self, cache, word, convert):
        value = cache.get(word)
        if value is None:
            value = convert(self.wordpiece_tokenizer.tokenize_word(word))
            if len(cache) < 1_000_000:
                cache[word] = value
        return value

    def tokenize(self, text: str) -> list[str]:
        output = []
        for word in self.basic_tokenizer.tokenize(text):
            output.extend(self._cached(self._piece_cache, word, tuple))
        return output

    tokenize_word = tokenize  # (a word of a sentence split into words: as any text)

    def tokenize_to_ids(self, text: str) -> list[int]:
        """`convert_tokens_to_ids(tokenize(text))`, faster."""
        output = []
        cache = self._id_cache
        for word in self.basic_tokenizer.tokenize(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._cached(cache, word, self.convert_tokens_to_ids)
            output.extend(ids)
        return output

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return convert_by_vocab(self.inv_vocab, ids)

    decode = staticmethod(join_wordpieces)
