"""A study continued from a real released checkpoint, end to end and tiny: all-MiniLM-L6-v2
(released without an MLM head) converted, a head fitted to its frozen encoder, then continued as
post-LN and as RealFormer for two steps with step 0 evaluated, and fine-tuned, as is the
checkpoint itself without continued pretraining (`released`)."""

import collections
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import script_processes
from helpers.in_process import ROOT, completed_in_process
from test_convert_checkpoint import minilm_dir

pytestmark = pytest.mark.slow  # five scripts end to end on a 22M-weight model

SHAPE = ("--max_seq_length=32", "--max_predictions_per_seq=5")


def _history(directory):
    return [json.loads(line) for line in (directory / "eval_history.jsonl").read_text().splitlines()]


def _small_task(data, directory, counts=(("train", 48), ("dev", 24), ("test", 24))):
    """The first rows of each split of the English sentiment task (its dev and test cut too)."""
    directory.mkdir()
    for split, count in counts:
        lines = (data / "sentiment" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        (directory / f"{split}.tsv").write_text("\n".join(lines[:count + 1]) + "\n", encoding="utf-8")


def test_a_released_checkpoint_gets_a_head_then_is_continued_as_realformer_and_fine_tuned(tmp_path):
    converted = completed_in_process("convert_checkpoint.py", "--from=hf", "--to=tf1", f"--input={minilm_dir()}",
                                     f"--output={tmp_path / 'minilm'}")
    assert converted.returncode == 0, converted.stderr[-2000:]
    minilm = tmp_path / "minilm"
    vocab = os.path.join(minilm_dir(), "vocab.txt")
    data = tmp_path / "data"
    english = ("prepare_study_data.py", "--data=english", f"--vocab_file={vocab}", f"--output_dir={data}",
               "--max_texts=400", *SHAPE)
    made = completed_in_process(*english, "--max_train_examples=48")
    assert made.returncode == 0, made.stderr[-2000:]
    tasks = json.loads((data / "tasks.json").read_text())
    assert tasks["max_train_examples"] == 48 and tasks["topics"]["train"]["examples"] == 48
    assert tasks["topics"]["dev"]["examples"] > 1000  # (dev and test whole)
    other = completed_in_process(*english, "--max_train_examples=96")
    assert other.returncode == 2 and other.stderr.strip().splitlines()[-1] == (
        f"error: {data}/tasks.json: the tasks there were made with --max_train_examples=48; use another "
        "--output_dir for other tasks")
    records = {"train": str(data / "train.tfrecord"), "eval": str(data / "eval.tfrecord")}

    # The head, fitted to the frozen encoder: the encoder's weights leave as they came.
    head = tmp_path / "head"
    fitted = completed_in_process(
        "run_pretraining.py", f"--bert_config_file={minilm / 'bert_config.json'}",
        f"--init_checkpoint={minilm / 'bert_model.ckpt'}", f"--input_file={records['train']}",
        f"--eval_input_file={records['eval']}", f"--output_dir={head}", "--do_train", "--no_nsp", "--train_heads_only",
        *SHAPE, "--train_batch_size=8", "--num_train_steps=3", "--num_warmup_steps=0", "--learning_rate=1e-3",
        "--eval_every_steps=3", "--max_eval_steps=2", "--eval_batch_size=8")
    assert fitted.returncode == 0, fitted.stderr[-3000:]
    assert "--train_heads_only: " in fitted.stderr and "weights of the heads train, the encoder is frozen" in \
        fitted.stderr
    before = tf.train.load_checkpoint(str(minilm / "bert_model.ckpt"))
    after = tf.train.load_checkpoint(str(head / "model.ckpt-3"))
    encoder = [name for name, _ in tf.train.list_variables(str(minilm / "bert_model.ckpt")) if name.startswith("bert/")]
    assert len(encoder) > 90
    for name in encoder:
        np.testing.assert_array_equal(after.get_tensor(name), before.get_tensor(name), err_msg=name)
    assert np.abs(after.get_tensor("cls/predictions/output_bias")).max() > 0  # (it starts at zeros)
    points = _history(head)
    assert [p["step"] for p in points] == [0, 3]
    assert points[1]["masked_lm_loss"] < points[0]["masked_lm_loss"] - 1.0

    # The study from MiniLM and its head: every variant continued, the checkpoint fine-tuned as released.
    _small_task(data, tmp_path / "sentiment")
    study = tmp_path / "study"
    command = [sys.executable, os.path.join(ROOT, "run_study.py"), f"--output_dir={study}",
               f"--bert_config_file={minilm / 'bert_config.json'}", f"--vocab_file={vocab}",
               f"--input_file={records['train']}", f"--eval_input_file={records['eval']}", *SHAPE,
               f"--init_checkpoint={head / 'model.ckpt-3'}", "--released_baseline", "--variants=post-LN,RealFormer",
               "--seeds=1", "--pretraining_flags=--no_nsp", "--train_batch_size=8", "--num_train_steps=2",
               "--num_warmup_steps=0", "--learning_rate=1e-4", "--eval_every_steps=2", "--max_eval_steps=2",
               "--eval_batch_size=8", "--attention_examples=8",
               f"--task=sentiment=run_classifier.py --task_name=generic --data_dir={tmp_path / 'sentiment'} "
               "--max_seq_length=32 --train_batch_size=8 --num_train_epochs=1 --do_predict"]
    finished = script_processes.run(command, capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert "8 runs ran, 0 re-used" in finished.stderr
    released = study / "runs" / "released" / "seed-1"
    assert sorted(p.name for p in released.iterdir()) == ["attention", "sentiment"]
    assert f"--init_checkpoint={head / 'model.ckpt-3'}\n" in (released / "sentiment" / "command.txt").read_text()

    # Step 0 is the head run's last point as post-LN (the same weights and evaluation masks) and
    # another function of those weights as RealFormer.
    post_ln = _history(study / "runs" / "post_ln" / "seed-1" / "pretraining")
    realformer = _history(study / "runs" / "realformer" / "seed-1" / "pretraining")
    assert [p["step"] for p in post_ln] == [p["step"] for p in realformer] == [0, 2]
    assert post_ln[0]["masked_lm_loss"] == pytest.approx(points[1]["masked_lm_loss"], abs=1e-5)
    assert abs(realformer[0]["masked_lm_loss"] - post_ln[0]["masked_lm_loss"]) > 1e-3

    results = json.loads((study / "results.json").read_text())
    assert results["variants"] == ["released", "post-LN", "RealFormer"]
    summary = {(e["task"], e["metric"], e["variant"]): e for e in results["summary"]}
    # the test split scored from the best dev checkpoint's predictions, against its labels
    rows = (tmp_path / "sentiment" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    labels = ["negative", "positive"]  # (the generic task's labels, sorted)
    truth = np.array([labels.index(line.split("\t")[0]) for line in rows])
    for variant, directory in (("released", released / "sentiment"),
                               ("RealFormer", study / "runs" / "realformer" / "seed-1" / "sentiment")):
        probabilities = np.loadtxt(directory / "test_results.tsv", delimiter="\t", ndmin=2)
        accuracy = float(np.mean(probabilities.argmax(axis=1) == truth))
        assert summary[("sentiment", "test_accuracy", variant)]["mean"] == pytest.approx(accuracy)
    difference = summary[("sentiment", "test_accuracy", "RealFormer")]["difference_to_released"]
    assert difference["mean"] == pytest.approx(summary[("sentiment", "test_accuracy", "RealFormer")]["mean"] -
                                               summary[("sentiment", "test_accuracy", "released")]["mean"])
    train = [line.split("\t")[0] for line in
             (tmp_path / "sentiment" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    share = float(np.mean(truth == labels.index(collections.Counter(train).most_common(1)[0][0])))
    assert results["baselines"]["sentiment"]["test_accuracy"] == pytest.approx(share)

    report = (study / "report.md").read_text()
    assert f"### From the released checkpoint (`{head / 'model.ckpt-3'}`)" in report
    gap = realformer[0]["masked_lm_accuracy"] - post_ln[0]["masked_lm_accuracy"]
    assert f"| RealFormer | {realformer[0]['masked_lm_accuracy']:.4f} | {gap:+.4f} | " in report
    assert "| post-LN | " in report and "| variant − released |" in report and "test accuracy" in report
    assert (study / "attention_entropy.png").stat().st_size > 1000
