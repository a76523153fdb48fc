"""run_classifier.py with the fine-tuning options beyond the original, end to end from the tiny
pretrained checkpoint: the layer-wise rates and the re-initialised top layer seen in the weights
after one step; every option at once killed with SIGKILL and resumed equal to the uninterrupted
run; the users' mistakes as one line."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import script_processes
from helpers.in_process import completed_in_process
from helpers.pretraining_runs import killed_after_a_save
from helpers.tiny_classifier_runs import TINY, tf1_weights
from helpers.tiny_classifier_runs import classifier_flags as _flags
from helpers.tiny_classifier_runs import thucnews_data as _data

from bert_realformer.training import recorded_options

pytestmark = pytest.mark.slow  # the scripts end to end

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_step_moves_each_layer_at_its_rate_and_the_top_layer_starts_afresh(tmp_path):
    """With Adam's bias correction the first step moves every weight whose gradient is not tiny
    by the learning rate itself (m/sqrt(v) = g/|g|): here 1e-3 times 0.5^depth (no warm-up, no
    weight decay). The top layer (of 3) and the pooler were re-initialised: their LayerNorm
    gamma is 1 and their biases 0, moved by one step; every other weight moved from the
    pretrained one. (The key biases get no gradient: softmax over the keys ignores what they add.)"""
    data = _data(tmp_path, ["good", "bad"] * 6)
    out = tmp_path / "out"
    result = completed_in_process("run_classifier.py", *_flags(
        data, out, "--do_train", "--train_batch_size=12", "--num_train_epochs=1", "--learning_rate=1e-3",
        "--warmup_proportion=0", "--weight_decay=0", "--layerwise_lr_decay=0.5", "--reinit_top_layers=1"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "re-initialised the top 1 of 3 encoder layers and the pooler" in result.stderr
    before, after = tf1_weights(f"{TINY}/bert_model.ckpt"), tf1_weights(out / "model.ckpt-1")
    for name, value in after.items():
        if name.endswith("attention/self/key/bias"):
            continue
        depth = (4 if name.startswith("bert/embeddings/") else 0 if not name.startswith("bert/encoder/layer_")
                 else 3 - int(name.split("/")[2].split("_")[1]))
        rate = 1e-3 * 0.5 ** depth
        fresh = name.startswith(("bert/encoder/layer_2/", "bert/pooler/"))
        if fresh and name.endswith(("gamma", "beta", "bias")):
            start = 1.0 if name.endswith("gamma") else 0.0
            np.testing.assert_allclose(np.abs(value - start).max(), rate, rtol=1e-2, err_msg=name)
        elif fresh:
            assert np.abs(value - before[name]).max() > 100 * rate, name
        elif name in before:
            np.testing.assert_allclose(np.abs(value - before[name]).max(), rate, rtol=1e-2, err_msg=name)


def test_every_option_at_once_resumes_exactly_after_sigkill(tmp_path):
    """Focal loss with label smoothing and balanced class weights on imbalanced labels (3:1),
    layer-wise rates, a re-initialised top layer, PGD, R-Drop and weight averages: killed after
    a save and run again, the same final weights and dev results as the run left alone. The
    exported weights are the averages the training state holds, not the weights it trained; the
    evaluations during training (every 6 steps) judged the averages, which the best checkpoint
    holds."""
    data = _data(tmp_path, (["good"] * 3 + ["bad"]) * 9)

    def command(out):
        return [sys.executable, os.path.join(ROOT, "run_classifier.py"), *_flags(
            data, out, "--do_train", "--do_eval", "--train_batch_size=4", "--num_train_epochs=2",
            "--learning_rate=1e-3", "--save_checkpoints_steps=6", "--iterations_per_loop=3", "--loss=focal",
            "--focal_gamma=1.5", "--label_smoothing=0.1", "--class_weights=balanced", "--layerwise_lr_decay=0.8",
            "--reinit_top_layers=1", "--adversarial=pgd", "--adversarial_steps=2", "--rdrop_alpha=1",
            "--ema_decay=0.9", "--eval_every_steps=6", "--keep_best_by=loss")]

    whole = script_processes.run(command(tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "class weights: good 0.6667, bad 2" in whole.stderr
    assert "adversarial training: PGD on the word embeddings (epsilon 0.001 of their norm, 2 steps)" in whole.stderr
    assert "weights: their moving averages (decay 0.9) from here on" in whole.stderr
    best_step = int(json.loads((tmp_path / "whole" / "best" / "best.json").read_text())["step"])
    for step, prefix in ((18, "model.ckpt-18"), (best_step, f"best/model.ckpt-{best_step}")):
        state = tf.train.load_checkpoint(str(tmp_path / "whole" / "training_state" / f"ckpt-{step}"))
        for name, value in tf1_weights(tmp_path / "whole" / prefix).items():
            key = name.replace("/", ".S") + "/.ATTRIBUTES/VARIABLE_VALUE"
            np.testing.assert_array_equal(value, state.get_tensor("averages/" + key), err_msg=name)
            if not name.endswith("key/bias"):  # (no gradient: softmax over the keys ignores what they add)
                assert not np.allclose(value, state.get_tensor("variables/" + key)), name
    killed = tmp_path / "killed"
    assert killed_after_a_save(command(killed), killed / "training_state", at_least=12) >= 12
    resumed = script_processes.run(command(killed), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "re-initialised" not in resumed.stderr  # (the resumed state holds the re-initialised layer)
    expected, got = tf1_weights(tmp_path / "whole" / "model.ckpt-18"), tf1_weights(killed / "model.ckpt-18")
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)
    assert (killed / "eval_results.txt").read_text() == (tmp_path / "whole" / "eval_results.txt").read_text()
    # (the stuck check went on with the windows the training state held: the same verdict, or none)
    stuck = [recorded_options.read(str(out)).get("stuck") for out in (killed, tmp_path / "whole")]
    assert stuck[0] == stuck[1]


@pytest.mark.parametrize("flags,said", [
    (["--class_weights=weights.tsv"], "--class_weights=weights.tsv: expected balanced or a file of LABEL<TAB>WEIGHT "
                                      "lines; there is no such file"),
    (["--reinit_top_layers=4"], f"--reinit_top_layers=4: {TINY}/bert_config.json has 3 layers"),
    (["--focal_gamma=1"], "--focal_gamma=1.0 is focal loss's: it needs --loss=focal"),
    (["--adversarial_steps=5"], "--adversarial_steps=5 is adversarial training's: it needs --adversarial=fgm or pgd"),
    (["--adversarial=fgm", "--adversarial_steps=5"], "--adversarial_steps=5 is PGD's (FGM takes one step): it needs "
                                                     "--adversarial=pgd"),
], ids=["class-weights-file", "reinit-too-many", "gamma-without-focal", "steps-without-adversarial",
        "steps-with-fgm"])  # (ranges: test_flag_ranges)
def test_a_mistaken_option_is_one_line(tmp_path, flags, said):
    data = _data(tmp_path, ["good", "bad"])
    result = completed_in_process("run_classifier.py", *_flags(data, tmp_path / "out", "--do_train", *flags))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: {said}"
