"""The chinese-roberta-wwm-ext recipe end to end: MLM-only pretraining (--no_nsp) on records
masked as they are read (--dynamic_masking), continued from a checkpoint with an NSP head,
with a step-0 evaluation; exact resume after SIGKILL; 2 replicas and accumulation equal to one
device; the result converted to Hugging Face and KerasHub."""

import json
import os
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.conversions import convert
from helpers.pretraining_runs import (
    DATA,
    ROOT,
    TINY,
    assert_same_run,
    command,
    eval_results,
    killed_after_a_save,
    run,
)

import modeling
from bert_realformer import checkpoints

pytestmark = pytest.mark.slow  # the scripts end to end, in subprocesses

HERE = os.path.dirname(os.path.abspath(__file__))
POST_LN = {**TINY, "residual_attention": "none"}
MLM_ONLY = ["--no_nsp", "--max_eval_steps=3"]


@pytest.fixture(scope="module")
def unmasked_records(tmp_path_factory):
    """English records made with --dynamic_masking --no_nsp (seq 64), with whole words."""
    path = str(tmp_path_factory.mktemp("records") / "unmasked.tfrecord")
    made = run([sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
                f"--input_file={DATA}/pretraining_data/input.txt", f"--output_file={path}",
                f"--vocab_file={DATA}/tokenization/vocab_en_uncased.txt", "--max_seq_length=64",
                "--dupe_factor=1", "--dynamic_masking", "--no_nsp", "--do_whole_word_mask"])
    assert made.returncode == 0, made.stderr[-2000:]
    assert "unmasked (masked when read)" in made.stderr
    return path


def _checkpoint_with_nsp(directory, config):
    model = modeling.BertPretrainer(modeling.BertConfig.from_dict(config))
    model.build()
    return checkpoints.save_tf1_checkpoint(model, str(directory / "released" / "bert_model.ckpt"))


def _event_tags(directory):
    import tensorflow as tf
    tags = set()
    for root, _, files in os.walk(directory):
        for name in files:
            if name.startswith("events"):
                for event in tf.compat.v1.train.summary_iterator(os.path.join(root, name)):
                    tags |= {value.tag for value in event.summary.value}
    return tags


def test_mlm_only_from_a_checkpoint_with_nsp_and_its_step_zero_point(tmp_path, unmasked_records):
    """No NSP head in the model or checkpoint, no NSP metric anywhere; the NSP weights of the
    starting checkpoint are listed as unused; step 0 of the history equals a plain --do_eval of
    the starting checkpoint; the result converts to BertForMaskedLM and KerasHub's BertMaskedLM."""
    released = _checkpoint_with_nsp(tmp_path, POST_LN)
    records = f"--eval_input_file={unmasked_records}"
    result = run(command(tmp_path, "--do_train", "--do_eval", "--num_train_steps=6", "--eval_every_steps=3",
                         "--save_checkpoints_steps=3", records, f"--init_checkpoint={released}", *MLM_ONLY,
                         config=POST_LN, input_file=unmasked_records))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "in it but unused: cls/seq_relationship/output_bias, cls/seq_relationship/output_weights" in result.stderr
    assert "records are unmasked" in result.stderr
    assert "next_sentence" not in result.stderr and "eval at step 0:" in result.stderr
    out = tmp_path / "out"
    assert sorted(eval_results(out)) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    assert [p["step"] for p in history] == [0, 3, 6]
    assert all(sorted(p) == ["loss", "masked_lm_accuracy", "masked_lm_loss", "step"] for p in history)
    assert not any("next_sentence" in tag for tag in _event_tags(out))
    assert {"masked_lm_loss", "masked_lm_accuracy"} <= _event_tags(out)
    weights = checkpoints.read_tf1_checkpoint(str(out / "model.ckpt-6"))
    assert "cls/predictions/output_bias" in weights
    assert not any(name.startswith("cls/seq_relationship") for name in weights)

    # The step-0 point is the starting checkpoint evaluated alone.
    alone_dir = tmp_path / "alone"
    alone_dir.mkdir()
    alone = run(command(alone_dir, "--do_eval", records, f"--init_checkpoint={released}", *MLM_ONLY,
                        config=POST_LN, input_file=unmasked_records))
    assert alone.returncode == 0, alone.stderr[-3000:]
    start = eval_results(alone_dir / "out")
    assert start["global_step"] == "0"
    for key in ("loss", "masked_lm_accuracy", "masked_lm_loss"):
        assert abs(float(start[key]) - history[0][key]) < 1e-6, key
    assert abs(history[-1]["masked_lm_loss"] - float(eval_results(out)["masked_lm_loss"])) < 1e-6

    hub = convert("--from=tf1", "--to=kerashub", f"--input={out}/model.ckpt-6", f"--output={tmp_path}/hub",
                  f"--vocab_file={DATA}/tokenization/vocab_en_uncased.txt",
                  f"--bert_config_file={tmp_path}/bert_config.json")
    assert hub.returncode == 0, hub.stderr[-2000:]
    assert "BertMaskedLM" in hub.stderr + hub.stdout


def test_killed_mlm_only_run_on_dynamic_masks_resumes_exactly(tmp_path, unmasked_records):
    """SIGKILL after a save, restart: the weights and eval results of the uninterrupted run
    (masks drawn from the stream position, dropout from the step)."""
    flags = ["--do_train", "--do_eval", "--num_train_steps=30", "--save_checkpoints_steps=5",
             "--iterations_per_loop=5", "--keep_checkpoint_max=100", f"--eval_input_file={unmasked_records}",
             *MLM_ONLY]
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    whole_dir.mkdir()
    killed_dir.mkdir()
    whole = run(command(whole_dir, *flags, input_file=unmasked_records))
    assert whole.returncode == 0, whole.stderr[-3000:]

    cmd = command(killed_dir, *flags, input_file=unmasked_records)
    state = killed_dir / "out" / "training_state"
    last = killed_after_a_save(cmd, state)
    assert 10 <= last < 30
    resumed = run(cmd)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {state}/ckpt-{last} at step {last}" in resumed.stderr
    assert_same_run(whole_dir, killed_dir, 30, keys=("loss", "masked_lm_loss", "masked_lm_accuracy"))


def test_two_replicas_and_accumulation_equal_one_device(tmp_path, unmasked_records):
    result = script_processes.run([sys.executable, os.path.join(HERE, "helpers", "dynamic_masking_replicas.py"),
                             unmasked_records, str(tmp_path)], capture_output=True, text=True, timeout=900,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(next(t for t in result.stdout.splitlines() if t.startswith("RESULT "))[len("RESULT "):])
    # No dropout: one device (8), one device accumulating 2 x 4 and 2 replicas x 4 compute the same steps.
    for name in ("accumulated", "mirrored"):
        for a, b in zip(runs["one_device"], runs[name]):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5, err_msg=name)
    # Dropout on: 2 replicas x 4 draw what one device accumulating 2 x 4 draws.
    for a, b in zip(runs["accumulated_dropout"], runs["mirrored_dropout"]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5)
    assert not np.allclose(np.asarray(runs["one_device"][0]), np.asarray(runs["accumulated_dropout"][0]), atol=1e-4)
