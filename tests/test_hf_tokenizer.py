"""The tokenizer.json written beside a Hugging Face conversion is the original tokenizer: run by
Hugging Face's `tokenizers` (the library transformers' fast tokenizers run), its words equal
the reference BasicTokenizer's for every character this Python's Unicode database assigns and
on real Chinese and English text, and its ids equal ours; transformers' own BertTokenizer does
not (private-use characters, CJK Extension E, words of 101-200 characters)."""

import os
import sys
import unicodedata

import pytest
import tokenizers

from bert_realformer import realdata
from bert_realformer.checkpoints.hf_tokenizer import tokenizer_json
from bert_realformer.errors import InputError
from tokenization import FullTokenizer
from tokenization.reference import BasicTokenizer

VOCAB_ZH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tokenization", "vocab_zh.txt")
# `tokenizers`' NFD lacks this character's canonical decomposition (U+11935 U+11930, Dives Akuru).
NFD_MISSING = {0x11938}


def _pipeline(do_lower_case, vocab=VOCAB_ZH):
    return tokenizers.Tokenizer.from_str(tokenizer_json(vocab, do_lower_case))


def _words(tokenizer, text):
    return [word for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text))]


def _characters():
    """Every code point this Python assigns, with the private-use area of the BMP and the ends of
    planes 15 and 16 (private use as well), each inside a word and beside a CJK character."""
    private = [*range(0xE000, 0xF900), *range(0xF0000, 0xF0100), *range(0x10FF00, 0x110000)]
    assigned = [cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
    return sorted(set(assigned + private))


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_words_equal_the_reference_for_every_character(do_lower_case):
    pipeline, reference = _pipeline(do_lower_case), BasicTokenizer(do_lower_case)
    differ = [hex(cp) for cp in _characters() if not (do_lower_case and cp in NFD_MISSING)
              and _words(pipeline, f"ab{chr(cp)}cd 中{chr(cp)}") != reference.tokenize(f"ab{chr(cp)}cd 中{chr(cp)}")]
    assert differ == []


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_words_equal_the_reference_on_real_text(do_lower_case):
    pipeline, reference = _pipeline(do_lower_case), BasicTokenizer(do_lower_case)
    texts = ([text for text, _ in realdata.sentiment_reviews()] + list(realdata.peoples_daily_lines())[:3000]
             + list(realdata.english_sentences()))
    differ = [text for text in texts if _words(pipeline, text) != reference.tokenize(text)]
    assert differ == []


def test_the_cases_transformers_bert_tokenizer_reads_otherwise():
    """Each with its own words; Greek's final sigma as Python's str.lower() writes it."""
    pipeline, reference = _pipeline(True), BasicTokenizer(True)
    cases = {"不能\ue139期": ["不", "能", "\ue139", "期"], "\U0002b820字": ["\U0002b820", "字"],
             "ΟΔΟΣ Α'Σ ΣΑΣ.": ["οδος", "α", "'", "ς", "σας", "."], "ab\u0903cd": ["ab\u0903cd"],
             "a\u2028b\u00a0c\x00d\u200be\ufffd": ["a", "b", "cde"], "Καλημέρα": ["καλημερα"]}
    for text, words in cases.items():
        assert reference.tokenize(text) == words, text
        assert _words(pipeline, text) == words, text


def test_ids_equal_ours_with_the_original_template():
    """[CLS] A [SEP] and [CLS] A [SEP] B [SEP] (B's type 1) on real reviews; a word of 150
    characters is split as the original splits it (up to 200), not read as [UNK]."""
    pipeline, ours = _pipeline(True), FullTokenizer(VOCAB_ZH, do_lower_case=True)
    cls, sep = ours.vocab["[CLS]"], ours.vocab["[SEP]"]
    reviews = [text for text, _ in realdata.sentiment_reviews()][:2000] + ["x" * 150]
    encoded = pipeline.encode_batch(reviews)
    assert [e.ids for e in encoded] == [[cls, *ours.tokenize_to_ids(text), sep] for text in reviews]
    assert encoded[-1].ids[1:-1] != [ours.vocab["[UNK]"]]
    pair = pipeline.encode(reviews[0], reviews[1])
    a, b = ours.tokenize_to_ids(reviews[0]), ours.tokenize_to_ids(reviews[1])
    assert pair.ids == [cls, *a, sep, *b, sep]
    assert pair.type_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)


def test_special_tokens_written_in_the_text_are_those_tokens():
    """The one difference kept: Hugging Face's fill-mask pipeline needs [MASK] in the text."""
    ours = FullTokenizer(VOCAB_ZH)
    ids = _pipeline(True).encode("巴黎是[MASK]国的首都", add_special_tokens=False).ids
    assert ids == [ours.vocab[token] for token in ("巴", "黎", "是", "[MASK]", "国", "的", "首", "都")]


def test_a_vocabulary_without_the_special_tokens_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab.txt: no \[CLS\], \[SEP\] \(a BERT vocabulary holds"):
        tokenizer_json(str(vocab), True)


def test_vocab_txt_comes_back_from_tokenizer_json_line_for_line(tmp_path):
    """A duplicate line of vocab.txt (the later one wins, as in the original) leaves an id no
    token holds: it comes back as a line no text tokenizes to, so every token keeps its id."""
    from bert_realformer.checkpoints.hf_tokenizer import vocabulary_beside, vocabulary_of
    from tokenization.reference import load_vocab, vocab_lines
    (tmp_path / "tokenizer.json").write_text(tokenizer_json(VOCAB_ZH, True), encoding="utf-8")
    assert vocabulary_of(str(tmp_path / "tokenizer.json")) == vocab_lines(VOCAB_ZH)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    written = vocabulary_beside(str(tmp_path), str(scratch))
    assert open(written, encoding="utf-8").read().splitlines() == vocab_lines(VOCAB_ZH)
    (tmp_path / "vocab.txt").write_text("", encoding="utf-8")
    assert vocabulary_beside(str(tmp_path), str(scratch)) is None  # (a vocab.txt beside it is read as it is)

    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "a", "##b"]
    vocab = tmp_path / "duplicates.txt"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text(tokenizer_json(str(vocab), True), encoding="utf-8")
    back = vocabulary_of(str(tmp_path / "tokenizer.json"))
    assert back == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[gap 4]", "a", "##b"]
    again = tmp_path / "again.txt"
    again.write_text("\n".join(back) + "\n", encoding="utf-8")
    assert {t: i for t, i in load_vocab(str(again)).items() if not t.startswith("[gap")} == dict(load_vocab(str(vocab)))


def test_a_tokenizer_json_without_a_wordpiece_vocabulary_is_one_line(tmp_path):
    from bert_realformer.checkpoints.hf_tokenizer import vocabulary_of
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}', encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer.json: no WordPiece vocabulary \(BERT's tokenizer is WordPiece; "
                                         r"its model is 'BPE'\); pass vocab_file$"):
        vocabulary_of(str(path))
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer.json: not a tokenizer.json \("):
        vocabulary_of(str(path))
