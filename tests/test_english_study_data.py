"""prepare_study_data.py --data=english: the English corpus as MLM-only TFRecords with a
released checkpoint's vocabulary, and the two English tasks as TSV files with their class
balance, end to end."""

import json
import os

import pytest
import tensorflow as tf
from helpers.in_process import completed_in_process
from test_convert_checkpoint import minilm_dir

from bert_realformer.realdata.splits import normalised

pytestmark = pytest.mark.slow  # the script end to end


def _minilm_vocab():
    return os.path.join(minilm_dir(), "vocab.txt")


def test_the_english_study_data_is_written_once_and_holds_no_scored_text_in_pretraining(tmp_path):
    out = tmp_path / "data"
    common = ["--data=english", f"--output_dir={out}", "--max_seq_length=64", "--max_predictions_per_seq=10",
              "--max_texts=400"]
    refused = completed_in_process("prepare_study_data.py", *common)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == ("error: --data=english needs --vocab_file (the vocabulary "
                                                       "of the checkpoint to continue)")
    made = completed_in_process("prepare_study_data.py", *common, f"--vocab_file={_minilm_vocab()}")
    assert made.returncode == 0, made.stderr[-3000:]
    assert "--no_nsp --dynamic_masking" in made.stdout and "--dupe_factor=1" in made.stdout
    # The records: MLM-only, unmasked (no next_sentence_labels, masked as read), 64 tokens, of
    # 380 and 20 texts packed 8 to a document.
    for name, texts in (("train", 380 // 8), ("eval", 20 // 8)):
        dataset = tf.data.TFRecordDataset(str(out / f"{name}.tfrecord"))
        records = [tf.train.Example.FromString(record.numpy()) for record in dataset]
        assert len(records) >= texts
        features = records[0].features.feature
        assert "next_sentence_labels" not in features and len(features["input_ids"].int64_list.value) == 64
    pretrained = {normalised(t) for t in (out / "english_train.txt").read_text(encoding="utf-8").splitlines()}
    assert len(pretrained - {""}) == 380
    balance = json.loads((out / "tasks.json").read_text())
    for task, classes in (("sentiment", 2), ("topics", 30)):
        rows = {split: (out / task / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
                for split in ("train", "dev", "test")}
        assert all(lines[0] == "label\ttext" for lines in rows.values())
        assert {split: len(lines) - 1 for split, lines in rows.items()} == \
            {split: balance[task][split]["examples"] for split in rows}
        assert len(balance[task]["train"]["classes"]) == classes
        scored = {normalised(line.split("\t", 1)[1]) for split in ("dev", "test") for line in rows[split][1:]}
        assert not scored & pretrained
    again = completed_in_process("prepare_study_data.py", *common, f"--vocab_file={_minilm_vocab()}")
    assert again.returncode == 0 and again.stdout.count("done already") == 3


def test_a_missing_data_package_ends_in_the_line_that_installs_it(tmp_path, monkeypatch):
    """A study's data needs packages `make` installs; without one the script says which, in one
    line (it was a traceback)."""
    monkeypatch.setenv("REALDATA_DIR", str(tmp_path / "nowhere"))  # (the VADER sdist is looked for there)
    made = completed_in_process("prepare_study_data.py", "--data=english", f"--output_dir={tmp_path / 'data'}",
                                f"--vocab_file={_minilm_vocab()}")
    assert made.returncode == 2
    assert made.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path}/nowhere/vaderSentiment-3.3.2.tar.gz is missing: pip download --no-deps --no-binary "
        f":all: vaderSentiment==3.3.2 -d {tmp_path}/nowhere")
    assert not (tmp_path / "data" / "tasks.json").exists()

