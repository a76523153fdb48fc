"""create_pretraining_data.py against the ORIGINAL script's output, plus our extensions."""

import array
import json
import os
import sys

import pytest
import tensorflow as tf
from helpers import script_processes

from bert_realformer.pretraining.records import feature_spec
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
FIXTURE = os.path.join(DATA, "pretraining_data")
VOCAB_EN = os.path.join(DATA, "tokenization", "vocab_en_uncased.txt")
INPUT = os.path.join(FIXTURE, "input.txt")
VOCAB_ZH = os.path.join(DATA, "tokenization", "vocab_zh.txt")
FIXTURE_FLAGS = ["--do_lower_case=True", "--max_seq_length=64", "--max_predictions_per_seq=10",
                 "--masked_lm_prob=0.15", "--short_seq_prob=0.1", "--dupe_factor=2",
                 "--random_seed=12345"]


def create(tmp_path, *flags, input_file=INPUT, vocab=VOCAB_EN,
           output="out.tfrecord"):
    output_path = str(tmp_path / output)
    cmd = [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
           f"--input_file={input_file}", f"--output_file={output_path}", f"--vocab_file={vocab}",
           *flags]
    result = script_processes.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    return result, output_path


def read_records(path, max_seq_length=64, max_predictions=10):
    spec = feature_spec(max_seq_length, max_predictions)
    return [{k: v.numpy().tolist() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(path)]


def expected_records(jsonl, vocab=VOCAB_EN, max_seq_length=64, max_predictions=10):
    """The fixture's instances converted and padded as the original writer does."""
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    rows = []
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            inst = json.loads(line)
            ids = tokenizer.convert_tokens_to_ids(inst["tokens"])
            n, m = len(ids), len(inst["masked_lm_positions"])
            pad, mpad = [0] * (max_seq_length - n), [0] * (max_predictions - m)
            rows.append({"input_ids": ids + pad, "input_mask": [1] * n + pad,
                         "segment_ids": inst["segment_ids"] + pad,
                         "masked_lm_positions": inst["masked_lm_positions"] + mpad,
                         "masked_lm_ids": tokenizer.convert_tokens_to_ids(inst["masked_lm_labels"]) + mpad,
                         "masked_lm_weights": [1.0] * m + [0.0] * len(mpad),
                         "next_sentence_labels": [int(inst["is_random_next"])]})
    return rows


def assert_same_records(ours, expected):
    assert len(ours) == len(expected)
    for index, (a, b) in enumerate(zip(ours, expected)):
        for key in b:
            assert a[key] == b[key], (index, key)


@pytest.mark.parametrize("name,wwm,workers,use_native", [
    ("plain", False, 1, True), ("wwm", True, 2, True),  # the C instance maker
    ("plain", False, 2, False), ("wwm", True, 1, False),  # the pure-Python path
])
def test_instances_are_the_originals_in_the_same_order(tmp_path, name, wwm, workers, use_native):
    result, output = create(tmp_path, *FIXTURE_FLAGS, f"--do_whole_word_mask={wwm}",
                            f"--num_workers={workers}", f"--use_native={use_native}")
    assert result.returncode == 0, result.stderr
    ours = read_records(output)
    assert_same_records(ours, expected_records(os.path.join(FIXTURE, f"{name}.jsonl")))
    # And against the original's own records, parsed.
    assert ours == read_records(os.path.join(FIXTURE, f"{name}.tfrecord"))
    assert "instances" in result.stderr.splitlines()[-1]
    assert os.listdir(tmp_path) == ["out.tfrecord"]  # no temporary files left


def test_output_round_robins_over_several_files(tmp_path):
    outputs = f"{tmp_path}/a.tfrecord,{tmp_path}/b.tfrecord"
    cmd_result = script_processes.run(
        [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
         f"--input_file={FIXTURE}/input.*", f"--output_file={outputs}", f"--vocab_file={VOCAB_EN}",
         *FIXTURE_FLAGS], capture_output=True, text=True, timeout=600)
    assert cmd_result.returncode == 0, cmd_result.stderr
    a, b = read_records(f"{tmp_path}/a.tfrecord"), read_records(f"{tmp_path}/b.tfrecord")
    expected = expected_records(os.path.join(FIXTURE, "plain.jsonl"))
    assert_same_records(a, expected[0::2])
    assert_same_records(b, expected[1::2])


def test_truncating_a_pair_cuts_and_draws_as_the_original_one_token_at_a_time():
    """The counted cuts equal the original's loop (delete the longer list's first or last token,
    B on a tie, one random draw each), for lengths on both sides of the limit, and leave the
    random stream where that loop does."""
    import random

    from bert_realformer.pretraining.instances import truncate_seq_pair

    def one_at_a_time(a, b, limit, rng):
        while len(a) + len(b) > limit:
            longer = a if len(a) > len(b) else b
            if rng.random() < 0.5:
                del longer[0]
            else:
                longer.pop()

    lengths = random.Random(7)
    for case in range(300):
        a = list(range(lengths.randint(0, 120)))
        b = list(range(1000, 1000 + lengths.randint(0, 120)))
        limit = lengths.randint(1, 130)
        expected_a, expected_b, expected_rng = list(a), list(b), random.Random(case)
        one_at_a_time(expected_a, expected_b, limit, expected_rng)
        rng = random.Random(case)
        truncate_seq_pair(a, b, limit, rng)
        assert (a, b) == (expected_a, expected_b), case
        assert rng.random() == expected_rng.random()


def test_sentence_order_pairs_are_a_documents_consecutive_text_in_or_out_of_order():
    """Documents of numbered sentences (token 1000 d + 10 s + k: document d, sentence s): with
    `sentence_order` every pair whose texts come from one document is A then the text right after
    it (label 0) or the two swapped (label 1), about half each; a B from another document comes
    only after a chunk of one sentence (label 1, as google-research/albert makes it). Next-sentence
    pairs of the same documents take other documents' B after longer chunks too."""
    import random

    from bert_realformer.pretraining.instances import MaskingOptions, VocabIds, create_training_instances

    rng = random.Random(3)
    documents = [[array.array("i", [1000 * d + 10 * s + k for k in range(rng.randint(2, 5))])
                  for s in range(rng.randint(1, 6))] for d in range(1, 31)]
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3,
             **{str(t): t for document in documents for sentence in document for t in sentence}}
    unmasked = MaskingOptions(dynamic=True)

    def pairs(sentence_order):
        made = create_training_instances([list(d) for d in documents], 64, 5, 0.1, unmasked, VocabIds(vocab),
                                         random.Random(12345), sentence_order=sentence_order)
        for instance in made:
            sep = instance.input_ids.index(2)
            yield instance.input_ids[1:sep], instance.input_ids[sep + 1:-1], instance.is_random_next

    def where(token):
        return token // 1000, token % 1000 // 10

    swapped = kept = 0
    for a, b, label in pairs(True):
        (doc_a, first_a), (_, last_a), (doc_b, first_b), (_, last_b) = map(where, (a[0], a[-1], b[0], b[-1]))
        if doc_a != doc_b:
            assert label and first_a == last_a, (a, b)  # (a one-sentence chunk)
        elif label:
            assert last_b + 1 == first_a, (a, b)
            swapped += 1
        else:
            assert last_a + 1 == first_b, (a, b)
            kept += 1
    assert swapped + kept > 100 and 0.35 < swapped / (swapped + kept) < 0.65
    assert any(where(a[0])[0] != where(b[0])[0] and where(a[0])[1] != where(a[-1])[1] for a, b, _ in pairs(False))


def test_the_word_pieces_of_sentencepiece_and_bpe_vocabularies():
    """Whole-word masking's continuation marks: WordPiece's `##` pieces; for SentencePiece and
    byte-level BPE every token but those starting a word (`▁`, `Ġ`) and the special ones."""
    from bert_realformer.pretraining.instances import VocabIds
    wordpiece = VocabIds({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "the": 4, "##re": 5})
    assert wordpiece.continuation_flags == bytes([0, 0, 0, 0, 0, 1])
    pieces = {"<unk>": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "▁the": 4, "re": 5, "▁": 6, ",": 7}
    sentence_piece = VocabIds(pieces, ("<unk>", "[CLS]", "[SEP]", "[MASK]"), word_start="▁")
    assert sentence_piece.continuation_flags == bytes([0, 0, 0, 0, 0, 1, 0, 1])
    assert (sentence_piece.cls, sentence_piece.sep, sentence_piece.mask) == (1, 2, 3)
    bpe = VocabIds({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "Ġthe": 5, "re": 6},
                   ("<unk>", "<s>", "</s>", "<mask>"), word_start="Ġ")
    assert bpe.continuation_flags == bytes([0, 1, 0, 0, 0, 0, 1])  # (<pad> is no special of instances)
