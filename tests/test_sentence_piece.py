"""ALBERT's SentencePiece tokenizer against the `sentencepiece` library (the one the original
calls) on a model trained here from real English and Chinese lines: the same pieces and ids on
4,000 held-out lines, once the text is prepared as google-research/albert's `preprocess_text`
says (white space collapsed, NFKD without combining marks, lower case); a piece ending in a
digit and a comma is cut again (the original's `encode_pieces`), by hand."""

import unicodedata

import pytest

from tokenization.sentence_piece import SentencePieceTokenizer, preprocess_text
from tokenization.vocabularies import tokenizer_for

spm = pytest.importorskip("sentencepiece")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, real_data):
    """(spiece.model path, the reference processor, held-out lines): a unigram model of 5,000
    pieces (ALBERT's ids: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4; `0,` a piece of its own, as
    a model trained on more text would learn pieces ending in a comma)."""
    english, chinese = real_data.english_sentences(), real_data.peoples_daily_lines()
    path = tmp_path_factory.mktemp("spm") / "spiece.model"
    with open(path, "wb") as model:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter([preprocess_text(line, True) for line in english[:6000] + chinese[:3000]]),
            model_writer=model, vocab_size=5000, model_type="unigram", character_coverage=0.9995, pad_id=0,
            unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
            user_defined_symbols=["0,"], minloglevel=2)
    reference = spm.SentencePieceProcessor(model_file=str(path))
    return str(path), reference, english[6000:9000] + chinese[3000:4000]


def _reference_text(line):
    """google-research/albert's preparation, written out from its description."""
    text = " ".join(line.split())
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.combining(c) == 0)
    return text.lower()


def test_the_pieces_and_ids_are_the_sentencepiece_librarys_on_real_lines(trained):
    path, reference, lines = trained
    ours = tokenizer_for(path, do_lower_case=True)
    assert isinstance(ours, SentencePieceTokenizer)
    assert [ours.vocab[token] for token in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert ours.unk_token == "<unk>" and len(ours.vocab) == reference.get_piece_size() == 5000
    extra = ["  Two  SPACES\tand a tab\n", "Naïve CAFÉ résumé", "全角，标点。", "emoji 😀 ok", ""]
    compared = 0
    for line in lines + extra:
        expected = reference.encode_as_pieces(_reference_text(line))
        if any(len(piece) > 1 and piece.endswith(",") and piece[-2].isdigit() for piece in expected):
            continue  # (cut again: the next test)
        tokens = ours.tokenize(line)
        assert tokens == expected, line
        assert ours.convert_tokens_to_ids(tokens) == reference.encode_as_ids(_reference_text(line)), line
        compared += 1
    assert compared > 3900
    assert ours.convert_tokens_to_ids(["no such piece"]) == [1]


def test_a_piece_ending_in_a_digit_and_a_comma_is_cut_again(trained):
    """`0,` is a piece: "in 1990, then" gives `0,` after the number's first pieces; the original
    cuts `0` again without the comma (SentencePiece then puts a `▁` before it, dropped: the piece
    is inside a word) and keeps the comma apart."""
    path, reference, _ = trained
    pieces = reference.encode_as_pieces("in 1990, then")
    assert "0," in pieces
    expected = [part for piece in pieces for part in (["0", ","] if piece == "0," else [piece])]
    assert SentencePieceTokenizer(path).tokenize("In 1990, then") == expected


def test_the_graph_tokenizer_gives_the_eager_ids_on_every_line(trained):
    """`GraphSentencePiece` (TensorFlow ops only, what a SavedModel holds) on the held-out lines,
    edge cases and digit-comma lines (a piece cut again inside a word and at a word's start), in
    one batch: each line's ids are `SentencePieceTokenizer.tokenize_to_ids`'s, cased and uncased."""
    import tensorflow as tf

    from tokenization.sentence_piece import GraphSentencePiece
    path, _, lines = trained
    extra = ["  Two  SPACES\tand a tab\n", "Naïve CAFÉ résumé", "全角，标点。", "emoji 😀 ok", "", "In 1990, then",
             "0, 10, 1990, and 5,000,000, the\u3000end", "\u2003lead\u00a0and trail\u2028 "]
    for lower in (True, False):
        eager, graph = SentencePieceTokenizer(path, lower), GraphSentencePiece(path, lower)
        texts = lines + extra
        got = graph.tokenize(tf.constant(texts)).to_list()
        assert len(got) == len(texts)
        for line, ids in zip(texts, got, strict=True):
            assert ids == eager.tokenize_to_ids(line), line
    assert any("," in eager.tokenize(line)[:-1] and eager.tokenize(line) != [] for line in extra[5:7])


def test_a_truncated_model_is_one_error_naming_it(tmp_path, trained):
    from bert_realformer.errors import InputError
    damaged = tmp_path / "spiece.model"
    with open(trained[0], "rb") as f:
        damaged.write_bytes(f.read()[:1000])
    with pytest.raises(InputError, match=rf"^{damaged}: expected a SentencePiece model \(spiece.model\); it cannot "
                                         r"be parsed \(.+\); truncated\?$"):
        tokenizer_for(str(damaged))
