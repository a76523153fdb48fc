"""create_pretraining_data.py against the ORIGINAL script's output, plus our extensions."""

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
