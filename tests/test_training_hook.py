"""A training option as a hook of its own (tests/helpers/toy_hook.py, outside the package): the
driver calls it after each loop of steps, saves what it adds with the training state and gives it
back on resume, records its option for the run, and stops the run when it asks, at that step."""

import io
import json

import tensorflow as tf
from helpers.tiny_training import TINY, classification_task
from helpers.toy_hook import PlateauStop

import modeling
from bert_realformer.training.driver import Driver, RunOptions


def _driver(out, stream, **options):
    return Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(TINY, 2),
                  RunOptions(seed_globally=True, output_dir=str(out), iterations_per_loop=2, **options), stream=stream)


def test_a_hook_stops_a_run_that_no_longer_improves_and_keeps_its_state(tmp_path):
    out, said = tmp_path / "out", io.StringIO()
    # A rate so small the loss cannot fall: after the first loop, every loop is "no better".
    step = _driver(out, said, save_checkpoints_steps=2).train(
        classification_task(40, learning_rate=1e-12), hooks=[PlateauStop(patience=3)])
    assert step < 40
    assert f"plateau at step {step}: no lower loss in 3 loops" in said.getvalue()
    assert json.loads((out / "training_options.json").read_text())["plateau_patience"] == 3
    saved = dict(tf.train.list_variables(str(out / "training_state")))
    assert any(key.startswith("plateau_waited") for key in saved)
    reader = tf.train.load_checkpoint(str(out / "training_state"))
    assert reader.get_tensor("plateau_waited/.ATTRIBUTES/VARIABLE_VALUE") == 3

    # The same command again resumes the hook's state: the run is over at once, at the same step.
    again = io.StringIO()
    assert _driver(out, again, save_checkpoints_steps=2).train(
        classification_task(40, learning_rate=1e-12), hooks=[PlateauStop(patience=3)]) == step
    assert f"plateau at step {step}" in again.getvalue()
