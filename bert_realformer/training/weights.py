"""Which weights a run's model gets, loaded, with the lines that tell the user: a training run
resumes from its own training state or starts from the policy's choice (`training_states.
choose_weights`: the run's latest weights, else --init_checkpoint); an evaluation or prediction
run loads every weight of the model from the policy's choice. Each function returns the
`training_states.Checkpoint` the weights came from (None: fresh) and the lines to say."""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from bert_realformer import checkpoints
from bert_realformer.checkpoints import training_states
from bert_realformer.checkpoints.training_states import Checkpoint
from bert_realformer.training import recorded_config


def holds_optimizer(prefix: str) -> bool:
    """Whether the checkpoint is a training state (it has the optimizer's slots)."""
    return any(name.startswith("optimizer/") for name in checkpoints.checkpoint_keys(prefix))


def for_training(model: keras.Model, state: tf.train.Checkpoint, manager: tf.train.CheckpointManager,
                 output_dir: str, init_checkpoint: str | None) -> tuple[Checkpoint | None, list[str]]:
    """Restores `state` from the run's latest training state, else loads the starting weights
    into `model` (the policy's choice; none: the model's fresh weights stay)."""
    latest = manager.latest_checkpoint
    if latest and holds_optimizer(latest):
        training_states.check_training_state_matches(model, latest)
        with checkpoints.reading_checkpoint(latest):
            state.restore(latest).assert_existing_objects_matched()
        found = Checkpoint(latest, training_states.TRAINING_STATE_KIND, training_states.step_of(latest))
        return found, [f"weights: resuming from {latest} at step {found.step}"]
    found = training_states.choose_weights(output_dir, init_checkpoint, training=True)
    report = training_states.load_weights(model, found) if found else None
    return found, described(model, found, report, output_dir)


def for_inference(model: keras.Model, output_dir: str, init_checkpoint: str | None) -> tuple[Checkpoint, list[str]]:
    """Loads every weight of `model` from the policy's choice (a one-line error when there is
    none)."""
    found = training_states.choose_weights(output_dir, init_checkpoint, training=False)
    report = training_states.load_weights(model, found, strict=True)
    return found, described(model, found, report, output_dir)


def described(model: keras.Model, found: Checkpoint | None, report, output_dir: str) -> list[str]:
    """The `weights:` line, and one naming a change of variant from the checkpoint's recorded
    config (a checkpoint in another directory than the run's)."""
    lines = [training_states.describe(found, report)]
    in_output_dir = found is not None and (os.path.normpath(training_states.run_directory(found.prefix))
                                           == os.path.normpath(output_dir))
    if found is not None and not in_output_dir:
        change = recorded_config.variant_change(model.config, found.prefix)
        if change:
            lines.append(change)
    return lines
