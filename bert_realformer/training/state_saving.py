"""Saving a training state so that a failure or a kill leaves either the whole state or none of
it; a run stopped by a signal (saving first) or by a diverging loss (saving nothing); what a
failed run keeps, for its last line."""

import contextlib
import os
import signal

import tensorflow as tf

from bert_realformer import storage
from bert_realformer.checkpoints import training_states
from bert_realformer.errors import KEPT_NOTE, Diverged, Stopped


def save_state(manager: tf.train.CheckpointManager, step: int) -> None:
    """Saves the training state of `step`, flushed to the disk; a save that fails (a full disk)
    leaves no partial files behind. (TensorFlow writes the index naming it just before the
    flush: a power loss between leaves an index naming a state that may be damaged, which the
    next run sets aside, resuming from the previous one.)"""
    try:
        manager.save(checkpoint_number=step)
        if storage.is_local(manager.directory):  # (elsewhere a file is stored when it is closed)
            for path in [*storage.glob(os.path.join(manager.directory, f"ckpt-{step}.*")),
                         os.path.join(manager.directory, "checkpoint")]:
                storage.sync(path)
            storage.sync(manager.directory)
    except BaseException:
        remove_unfinished_saves(manager.directory)
        for path in storage.glob(os.path.join(manager.directory, f"ckpt-{step}.*")):
            storage.remove(path)
        raise


def remove_unfinished_saves(state_dir: str) -> None:
    """TensorFlow writes a save into `ckpt-N_temp/` and moves it into place at the end: such
    directories are what a failed or killed save left."""
    for path in storage.glob(os.path.join(state_dir, "ckpt-*_temp*")):
        storage.rmtree(path)


def what_is_kept(manager: tf.train.CheckpointManager) -> str:
    """What a run that fails now keeps, for its last line."""
    if manager.latest_checkpoint:
        return f"the training state {manager.latest_checkpoint} is intact"
    return "no training state was saved yet"


@contextlib.contextmanager
def naming_what_is_kept(manager: tf.train.CheckpointManager):
    """An error leaving the training loop (a full disk, memory, a lost worker) gets a note
    naming the training state that survives it (`KEPT_NOTE`), for the script's last line
    (`bert_realformer.commandline.runner`)."""
    try:
        yield
    except Exception as error:
        error.add_note(KEPT_NOTE + what_is_kept(manager))
        raise


def stop_with_state(signal_number: int, received: int | None, step: int, manager: tf.train.CheckpointManager):
    """Saves a training state at `step` (unless the loop just did) and ends the run (`Stopped`)
    for `signal_number` (`received`: the one this worker received, if any)."""
    if manager.latest_checkpoint is None or training_states.step_of(manager.latest_checkpoint) != step:
        save_state(manager, step)
    name = signal.Signals(signal_number).name
    sent = "" if received == signal_number else " (sent to another worker)"
    raise Stopped(f"stopped by {name}{sent} at step {step}: training state saved to "
                  f"{manager.latest_checkpoint}; run the same command again to resume", signal_number)


def divergence_error(step: int, metrics: dict, manager: tf.train.CheckpointManager, learning_rate: float) -> Diverged:
    """The error that ends a run whose step `step + 1` had a loss or gradient norm that is not
    finite; nothing from that step on is saved."""
    last = manager.latest_checkpoint or "none (no training state saved yet)"
    return Diverged(
        f"training diverged at step {step + 1}: loss {float(metrics['loss']):g}, gradient norm "
        f"{float(metrics['gradient_norm']):g}; stopped without saving it (last good training state: {last}); "
        f"try a lower learning_rate (now {learning_rate:g}) or more warmup", options=("learning_rate",))
