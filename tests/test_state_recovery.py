"""Resuming when `training_state/` cannot be taken at its word (the driver in-process on a tiny
classifier, states saved every 4 steps): a missing, empty, garbled or stale index is rebuilt from
the states on disk; a damaged newest state is moved aside (kept) and the previous one resumed;
each ends with the weights of a run never interrupted. When no state can be read the run stops
with one line naming the directory and moves nothing. Never: a fresh start over saved states."""

import io
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.tiny_training import TINY, classification_task

import modeling
from bert_realformer.checkpoints import CheckpointError, read_tf1_checkpoint, state_recovery
from bert_realformer.training.driver import Driver, RunOptions


def _train(out, steps, stream=None):
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(TINY, 2),
                    RunOptions(seed_globally=True,
                               output_dir=str(out), save_checkpoints_steps=4), stream=stream or io.StringIO())
    return driver.train(classification_task(steps))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "out"
    _train(out, 12)
    return read_tf1_checkpoint(str(out / "model.ckpt-12"))


def _assert_same_weights(out, uninterrupted):
    resumed = read_tf1_checkpoint(str(out / "model.ckpt-12"))
    for name, value in uninterrupted.items():
        np.testing.assert_allclose(resumed[name], value, atol=1e-6, err_msg=name)


def _index(state):
    return state / "checkpoint"


def _killed_after_step_8(out):
    """`out` as a 12-step run killed after saving its state of step 8 leaves it."""
    assert _train(out, 12) == 12
    state = out / "training_state"
    for path in [*state.glob("ckpt-12.*"), *out.glob("model.ckpt-12.*")]:
        path.unlink()
    state_recovery.write_index(str(state), [4, 8])
    return state


@pytest.mark.parametrize("damage,said", [
    (lambda state: _index(state).unlink(), "checkpoint is missing; rebuilt it"),
    (lambda state: _index(state).write_bytes(b""), "checkpoint cannot be read; rebuilt it"),
    (lambda state: _index(state).write_bytes(b"\x00\xffgarbage{"), "checkpoint cannot be read; rebuilt it"),
    (lambda state: state_recovery.write_index(str(state), [4]), "named ckpt-4 but ckpt-8"),
], ids=["missing", "empty", "garbled", "stale"])
def test_a_lost_or_garbled_index_resumes_from_the_newest_state(tmp_path, uninterrupted, damage, said):
    out = tmp_path / "out"
    state = _killed_after_step_8(out)
    damage(state)
    stream = io.StringIO()
    assert _train(out, 12, stream) == 12
    text = stream.getvalue()
    warnings = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and said in warnings[0] and warnings[0].endswith("resuming from ckpt-8"), warnings
    assert f"resuming from {state}/ckpt-8 at step 8" in text
    assert "freshly initialised" not in text
    _assert_same_weights(out, uninterrupted)


def _truncate_data(state, step):
    data = next(state.glob(f"ckpt-{step}.data-*"))
    data.write_bytes(data.read_bytes()[:64])


@pytest.mark.parametrize("damage", [
    lambda state: _truncate_data(state, 8),
    lambda state: (state / "ckpt-8.index").unlink(),
    lambda state: next(state.glob("ckpt-8.data-*")).unlink(),
], ids=["data-truncated", "index-missing", "data-missing"])
def test_a_damaged_newest_state_is_kept_aside_and_the_previous_one_resumed(tmp_path, uninterrupted, damage):
    out = tmp_path / "out"
    state = _killed_after_step_8(out)
    damage(state)
    left = {p.name: p.read_bytes() for p in state.glob("ckpt-8.*")}
    stream = io.StringIO()
    assert _train(out, 12, stream) == 12
    text = stream.getvalue()
    warnings = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, warnings
    assert f"{state}/ckpt-8" in warnings[0] and f"{state}/{state_recovery.DAMAGED}" in warnings[0]
    assert warnings[0].endswith("resuming from ckpt-4"), warnings
    assert f"resuming from {state}/ckpt-4 at step 4" in text
    # The damaged files are kept as they were; the resumed run's own ckpt-8 did not replace them.
    assert {name: (state / "damaged" / name).read_bytes() for name in left} == left
    assert (state / "ckpt-8.index").exists()
    _assert_same_weights(out, uninterrupted)


def test_when_no_state_can_be_read_the_run_stops_naming_the_directory(tmp_path):
    out = tmp_path / "out"
    assert _train(out, 4) == 4
    state = out / "training_state"
    _truncate_data(state, 4)
    _index(state).unlink()
    before = sorted(os.listdir(state))
    with pytest.raises(CheckpointError) as stopped:
        _train(out, 8)
    message = str(stopped.value)
    assert "\n" not in message and message.startswith(f"{state}/ckpt-4: cannot read checkpoint (")
    assert f"{state} holds no earlier training state" in message
    assert sorted(os.listdir(state)) == sorted([*before, "checkpoint"])  # the rebuilt index, nothing moved
    assert not list(out.glob("model.ckpt-8*"))


def test_the_states_on_disk_decide_by_hand(tmp_path):
    """Complete states have their index and every shard their names count."""
    for name in ("ckpt-2.index", "ckpt-2.data-00000-of-00001", "ckpt-4.index", "ckpt-4.data-00000-of-00002",
                 "ckpt-6.data-00000-of-00001", "ckpt-8.index", "ckpt-8.data-00000-of-00002",
                 "ckpt-8.data-00001-of-00002", "ckpt-10_temp", "other.txt"):
        (tmp_path / name).write_bytes(b"x")
    assert state_recovery.states_on_disk(str(tmp_path)) == [2, 8]
    assert state_recovery.incomplete_states(str(tmp_path)) == [4, 6]
