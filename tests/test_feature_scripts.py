"""extract_features.py and analyze_attention.py on text: every checkpoint kind, no random
weights, the text mode of analyze_attention.py."""

import json
import os

import pytest
from helpers.in_process import completed_in_process

from bert_realformer import checkpoints
from bert_realformer.checkpoints.training_states import write_training_state

pytestmark = pytest.mark.slow  # the scripts end to end

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSTLN = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
TEXT = "The cat sat on the mat ||| Dogs played in snow.\nHi\nA dog.\n"


def _run(script, *flags):
    return completed_in_process(script, *flags)  # (what the script computes: no process start-up needed)


def _extract(tmp_path, checkpoint, name):
    return _run("extract_features.py", f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/{name}",
                f"--vocab_file={POSTLN}/vocab.txt", f"--bert_config_file={POSTLN}/bert_config.json",
                f"--init_checkpoint={checkpoint}", "--layers=-1", "--max_seq_length=16")


def test_extract_features_reads_our_training_state_and_refuses_missing_weights(tmp_path):
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    released = _extract(tmp_path, f"{POSTLN}/bert_model.ckpt", "released.jsonl")
    assert released.returncode == 0, released.stderr[-2000:]
    run_dir = tmp_path / "run"
    write_training_state(checkpoints.read_tf1_checkpoint(POSTLN), str(run_dir))
    ours = _extract(tmp_path, str(run_dir), "ours.jsonl")
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert f"weights: training state {run_dir}/training_state/ckpt-0" in ours.stderr
    assert (tmp_path / "ours.jsonl").read_text() == (tmp_path / "released.jsonl").read_text()

    values = checkpoints.read_tf1_checkpoint(POSTLN)
    del values["bert/encoder/layer_1/output/dense/kernel"]
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "partial" / "bert_model.ckpt"))
    partial = _extract(tmp_path, str(tmp_path / "partial" / "bert_model.ckpt"), "partial.jsonl")
    assert partial.returncode == 2
    assert partial.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "lacks weights the model needs: bert/encoder/layer_1/output/dense/kernel" in partial.stderr
    assert not (tmp_path / "partial.jsonl").exists()


def test_analyze_attention_on_text_lines(tmp_path):
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    result = _run("analyze_attention.py", f"--bert_config_file={POSTLN}/bert_config.json",
                  f"--init_checkpoint={POSTLN}/bert_model.ckpt", f"--text_file={tmp_path}/in.txt",
                  f"--vocab_file={POSTLN}/vocab.txt", "--max_seq_length=16", "--batch_size=2",
                  f"--output_dir={tmp_path}/out")
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads((tmp_path / "out" / "attention_stats.json").read_text())
    config = json.load(open(f"{POSTLN}/bert_config.json"))
    assert len(stats["entropy"]) == config["num_hidden_layers"]
    assert len(stats["entropy"][0]) == config["num_attention_heads"]
    # Queries counted: the real tokens of the three lines (16 + 3 + 5 WordPieces with [CLS]/[SEP]).
    assert stats["entropy"][0][0]["count"] == 16 + 3 + 5
    assert (tmp_path / "out" / "attention_entropy.png").stat().st_size > 0
