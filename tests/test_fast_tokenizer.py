"""The tensorflow-text fast path gives exactly the reference's ids."""

import functools
import os

import pytest
import tensorflow as tf
from test_tokenization import CASES, DATA, read_cases

from tokenization import FullTokenizer
from tokenization.fast import FastTokenizer
from tokenization.reference import BasicTokenizer

EN = os.path.join(DATA, "vocab_en_uncased.txt")
ZH = os.path.join(DATA, "vocab_zh.txt")


def _reference_ids(tokenizer, texts):
    return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]


@pytest.mark.parametrize("cases,vocab", CASES)
@pytest.mark.parametrize("lower", [True, False])
def test_fast_matches_original_on_fixture_files(cases, vocab, lower):
    rows = read_cases(cases)
    fast = FastTokenizer(os.path.join(DATA, vocab), do_lower_case=lower)
    got = fast.tokenize_to_lists([row["text"] for row in rows])
    key = "lower_ids" if lower else "cased_ids"
    assert [i for i, ids in enumerate(got) if ids != rows[i][key]] == []


# Every code point of the planes with assigned characters -- the BMP, the SMP (1), the CJK
# extensions (2, 3), tags and variation selectors (14) -- and every 97th of the planes no Unicode
# version has assigned (4-13) and of the private-use planes (15, 16), whose code points all
# belong to one class each (unassigned, private use).
CODE_POINTS = [*range(0x40000), *range(0xE0000, 0xF0000), *range(0x40000, 0xE0000, 97),
               *range(0xF0000, 0x110000, 97)]


TEXTS = ["a" + chr(c) + "b " + chr(c) + " Σ" + chr(c) for c in CODE_POINTS if not 0xD800 <= c <= 0xDFFF]


@functools.cache
def _reference_words(lower):
    """Each of TEXTS split into words by the reference's character-by-character basic
    tokenizer (the same for every vocabulary: computed once per casing)."""
    basic = BasicTokenizer(do_lower_case=lower)
    return [basic.tokenize(text) for text in TEXTS]


@pytest.mark.slow
@pytest.mark.parametrize("vocab,lower", [(EN, True), (ZH, True), (EN, False)], ids=["uncased", "chinese", "cased"])
def test_fast_matches_reference_on_every_assigned_code_point(vocab, lower):
    """Each code point inside a word and alone: control, whitespace, punctuation, marks,
    case mappings (final sigma, İ), CJK blocks (extensions B-H included) and code points
    unassigned in Python's Unicode."""
    spec = FullTokenizer(vocab, do_lower_case=lower)
    pieces = spec.wordpiece_tokenizer.tokenize
    expected = [spec.convert_tokens_to_ids([p for word in words for p in pieces(word)])
                for words in _reference_words(lower)]
    compiled = _reference_ids(spec, TEXTS)
    fast = FastTokenizer(vocab, do_lower_case=lower).tokenize_to_lists(TEXTS)
    code_point = [hex(ord(t[1])) for t in TEXTS]
    assert [code_point[i] for i in range(len(TEXTS)) if compiled[i] != expected[i]] == []
    assert [code_point[i] for i in range(len(TEXTS)) if fast[i] != expected[i]] == []


@pytest.mark.slow
@pytest.mark.parametrize("language", ["zh", "en"])
def test_fast_matches_reference_on_real_text(real_data, language):
    if language == "zh":
        lines, vocab = real_data.peoples_daily_lines(split_sentences=True), ZH
    else:
        lines, vocab = real_data.english_sentences(), EN
    assert len(lines) >= 20000
    reference = _reference_ids(FullTokenizer(vocab, do_lower_case=True), lines)
    fast = FastTokenizer(vocab, do_lower_case=True).tokenize_to_lists(lines)
    assert [i for i in range(len(lines)) if reference[i] != fast[i]] == []


def test_fast_path_runs_inside_tf_data():
    fast = FastTokenizer(ZH, do_lower_case=True)
    dataset = tf.data.Dataset.from_tensor_slices(["你好，世界！", "ＨＴＴＰ ok"]).batch(2).map(fast.tokenize)
    ids = next(iter(dataset)).to_list()
    reference = FullTokenizer(ZH, do_lower_case=True)
    assert ids == _reference_ids(reference, ["你好，世界！", "ＨＴＴＰ ok"])


@pytest.mark.parametrize("lower", [True, False])
def test_words_longer_than_200_characters_are_unknown_as_in_the_reference(lower):
    """A word of more than 200 code points is one [UNK] (the reference's
    max_input_chars_per_word), counted in characters, not bytes; shorter ones are word pieces."""
    texts = [" ".join(["ab" * 100, "x" + "ab" * 100, "é" * 200, "é" * 201]), "the " + "q" * 250 + " end", "a b"]
    reference = _reference_ids(FullTokenizer(EN, do_lower_case=lower), texts)
    assert reference[0].count(FullTokenizer(EN, do_lower_case=lower).vocab["[UNK]"]) >= 2
    assert FastTokenizer(EN, do_lower_case=lower).tokenize_to_lists(texts) == reference
