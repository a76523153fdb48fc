"""NER pieces: conlleval's chunk counting by hand, CoNLL reading and tag schemes, windows that
give every token exactly one prediction, People's Daily POS tags to BIO."""

import os

import numpy as np
import pytest

from bert_realformer.errors import InputError
from bert_realformer.tasks.ner import features as ner_features
from bert_realformer.tasks.ner import metrics as ner_metrics
from bert_realformer.tasks.ner import reading as ner_data
from tokenization import FullTokenizer

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


# ---------------------------------------------------------------------- conlleval by hand
@pytest.mark.parametrize("tags,expected", [
    (["B-PER", "I-PER", "O", "B-LOC"], {("PER", 0, 1), ("LOC", 3, 3)}),
    (["I-ORG", "O", "I-PER", "I-PER", "B-PER"], {("ORG", 0, 0), ("PER", 2, 3), ("PER", 4, 4)}),  # IOB1
    (["O", "I-LOC", "I-LOC"], {("LOC", 1, 2)}),             # an I- after O starts a chunk
    (["B-PER", "I-LOC"], {("PER", 0, 0), ("LOC", 1, 1)}),    # an I-X that does not continue X
    (["S-LOC", "B-PER", "E-PER", "O", "B-ORG", "I-ORG", "E-ORG"],
     {("LOC", 0, 0), ("PER", 1, 2), ("ORG", 4, 6)}),         # BIOES
    (["B-PER", "B-PER"], {("PER", 0, 0), ("PER", 1, 1)}),
    (["O", "O"], set()),
])
def test_chunks_as_conlleval_counts_them(tags, expected):
    assert ner_metrics.chunks(tags) == expected


def test_entity_metrics_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "O"]]
    # gold chunks: PER(0,1) LOC(3,3) | ORG(0,1); predicted: PER(0,1) ORG(3,3) | ORG(0,0)
    # correct: PER only. precision 1/3, recall 1/3; tokens right: 3 of 4, 2 of 3.
    result = ner_metrics.entity_metrics(gold, pred)
    assert result["precision"] == pytest.approx(1 / 3) and result["recall"] == pytest.approx(1 / 3)
    assert result["f1"] == pytest.approx(1 / 3) and result["accuracy"] == pytest.approx(5 / 7)
    assert (result["PER_precision"], result["PER_recall"], result["PER_f1"], result["PER_support"]) == (1, 1, 1, 1)
    assert (result["LOC_precision"], result["LOC_recall"], result["LOC_support"]) == (0, 0, 1)
    assert (result["ORG_precision"], result["ORG_recall"], result["ORG_support"]) == (0, 0, 1)
    assert ner_metrics.entity_metrics([["O"]], [["O"]])["f1"] == 0.0


# ---------------------------------------------------------------------- reading
def test_conll_reading_iob1_conversion_and_docstart(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nU.N. NNP I-NP I-ORG\nofficial NN I-NP O\n"
                    "Ekeus NNP I-NP I-PER\nLee NNP I-NP I-PER\nKim NNP I-NP B-PER\n\n"
                    "Seattle NNP I-NP B-LOC\n")
    conll = ner_data.read_conll(str(path))
    assert [s.tokens for s in conll.sentences] == [["U.N.", "official", "Ekeus", "Lee", "Kim"], ["Seattle"]]
    assert conll.sentences[0].tags == ["B-ORG", "O", "B-PER", "I-PER", "B-PER"]
    assert conll.sentences[0].lines == [3, 4, 5, 6, 7]
    assert ner_data.labels_for("generic", conll) == ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]
    assert ner_data.labels_for("conll2003", conll) == [
        "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
    out = tmp_path / "pred.txt"
    ner_data.write_predictions(conll, [["B-ORG", "O", "B-PER", "I-PER", "O"], ["B-LOC"]], str(out))
    assert out.read_text().splitlines() == [
        "-DOCSTART- -X- -X- O O", "", "U.N. NNP I-NP I-ORG B-ORG", "official NN I-NP O O",
        "Ekeus NNP I-NP I-PER B-PER", "Lee NNP I-NP I-PER I-PER", "Kim NNP I-NP B-PER O", "",
        "Seattle NNP I-NP B-LOC B-LOC"]


def test_predictions_on_tab_separated_lines_are_appended_with_a_tab(tmp_path):
    """conlleval splits a line on one delimiter: a tab-separated file's predictions keep tabs."""
    path = tmp_path / "dev.tsv"
    path.write_text("-DOCSTART-\tO\n\nYork\tB-LOC\nis\tO\n")
    conll = ner_data.read_conll(str(path))
    out = tmp_path / "pred.txt"
    ner_data.write_predictions(conll, [["B-LOC", "O"]], str(out))
    lines = out.read_text().splitlines()
    assert lines == ["-DOCSTART-\tO\tO", "", "York\tB-LOC\tB-LOC", "is\tO\tO"]
    assert [len(line.split("\t")) for line in lines if line] == [3, 3, 3]


@pytest.mark.parametrize("text,message", [
    ("a B-X\nb\n", "train.txt:2: 1 columns where the file's first token line has 2"),
    ("a\n", "train.txt:1: expected a token and its tag, found one column"),
    ("a X-PER\n", "train.txt:1: tag 'X-PER' is not O or B-/I-/E-/S-<type>"),
    ("\n\n", "train.txt: no tokens"),
])
def test_malformed_lines_are_one_line_errors(tmp_path, text, message):
    (tmp_path / "train.txt").write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ner_data.read_conll(str(tmp_path / "train.txt"))


def test_unknown_tags_name_file_and_line(tmp_path):
    (tmp_path / "dev.txt").write_text("a O\nb B-PER\n\nc B-DATE\n")
    dev = ner_data.read_conll(str(tmp_path / "dev.txt"))
    with pytest.raises(InputError, match=r"dev.txt:4: tag 'B-DATE' is not in the training file's tags"):
        ner_data.check_labels(dev, ["O", "B-PER", "I-PER"])
    with pytest.raises(InputError, match=r"train.txt: no such file"):
        ner_data.data_path(str(tmp_path), "msra", "train")


# ---------------------------------------------------------------------- windows
def test_every_token_gets_exactly_one_prediction_slot():
    """A sentence longer than a window, a token that tokenizes to nothing (a control
    character) and a token longer than a whole window."""
    tokenizer = FullTokenizer(os.path.join(DATA, "bert_postln_tiny", "vocab.txt"), do_lower_case=True)
    words = [w for w in tokenizer.vocab if w.isalpha() and len(w) > 3][:30]
    tokens = words[:25] + ["\x07"] + ["".join(words[:12])] + words[25:]
    sentences = [ner_data.Sentence(tokens, ["O"] * len(tokens), list(range(len(tokens))), "x"),
                 ner_data.Sentence(["short"], ["B-X"], [0], "x")]
    arrays, windows = ner_features.sentence_windows(sentences, tokenizer, 12, {"O": 0, "B-X": 1})
    covered = [(w.sentence, w.start + i) for w in windows for i in range(w.length)]
    assert covered == [(0, i) for i in range(len(tokens))] + [(1, 0)]
    assert arrays["word_mask"].sum() == len(tokens) + 1
    assert arrays["input_mask"].sum(axis=1).max() <= 12
    unk = tokenizer.vocab["[UNK]"]
    control = next((i, w) for i, w in enumerate(windows) if w.sentence == 0 and w.start <= 25 < w.start + w.length)
    row, slot = control[0], 25 - control[1].start
    assert arrays["input_ids"][row, arrays["word_positions"][row, slot]] == unk
    # Predictions map back in order.
    window_tags = [[f"t{w.sentence}-{w.start + i}" for i in range(12)] for w in windows]
    back = ner_features.sentence_tags(windows, window_tags, sentences)
    assert back == [[f"t0-{i}" for i in range(len(tokens))], ["t1-0"]]
    assert np.all(arrays["label_ids"][arrays["word_mask"] == 0] == 0)


# ---------------------------------------------------------------------- People's Daily
def test_peoples_daily_pos_tags_to_bio():
    from bert_realformer import realdata
    chars, tags = realdata.pos_line_to_bio(
        "中共中央/nt  总书记/n  江/nr  泽民/nr  、/w  李/nr  鹏/nr  在/p  [中国/ns  政府/n]nt  "
        "北京/ns  上海/ns  [国务院/n  办公厅/n]nz  克林顿/nr")
    assert "".join(chars) == "中共中央总书记江泽民、李鹏在中国政府北京上海国务院办公厅克林顿"
    assert tags == (["B-ORG"] + ["I-ORG"] * 3 + ["O"] * 3 + ["B-PER", "I-PER", "I-PER", "O", "B-PER", "I-PER", "O"]
                    + ["B-ORG"] + ["I-ORG"] * 3 + ["B-LOC", "I-LOC", "B-LOC", "I-LOC"] + ["O"] * 6
                    + ["B-PER", "I-PER", "I-PER"])
