"""Which weights a run's model gets, loaded, with the lines that tell the user: a training run
resumes from its own training state or starts from the policy's choice (`training_states.
choose_weights`: the run's latest weights, else --init_checkpoint); an evaluation or prediction
run loads every weight of the model from the policy's choice or the run's best checkpoint.
Each function returns the `training_states.Checkpoint` the weights came from (None: fresh) and
the lines to say."""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from bert_realformer import checkpoints
from bert_realformer.checkpoints import training_states
from bert_realformer.checkpoints.training_states import Checkpoint
from bert_realformer.training import best_checkpoint, layerwise, recorded_config


def holds_optimizer(prefix: str) -> bool:
    """Whether the checkpoint is a training state (it has the optimizer's slots)."""
    return any(name.startswith("optimizer/") for name in checkpoints.checkpoint_keys(prefix))


def for_training(model: keras.Model, state: tf.train.Checkpoint, manager: tf.train.CheckpointManager,
                 output_dir: str, init_checkpoint: str | None, reinit_top_layers: int = 0,
                 seed: int = 0) -> tuple[Checkpoint | None, list[str]]:
    """Restores `state` from the run's latest training state, else loads the starting weights
    into `model` and re-initialises its top `reinit_top_layers` layers and the pooler from `seed`
    (`layerwise.reinitialize_top_layers`)."""
    latest = manager.latest_checkpoint
    if latest and holds_optimizer(latest):
        training_states.check_training_state_matches(model, latest)
        with checkpoints.reading_checkpoint(latest):
            state.restore(latest).assert_existing_objects_matched()
        found = Checkpoint(latest, training_states.TRAINING_STATE_KIND, training_states.step_of(latest))
        return found, [f"weights: resuming from {latest} at step {found.step}"]
    found = training_states.choose_weights(output_dir, init_checkpoint, training=True)
    report = training_states.load_weights(model, found) if found else None
    lines = described(model, found, report, output_dir)
    if reinit_top_layers:
        layerwise.reinitialize_top_layers(model, reinit_top_layers, seed)
        lines.append(f"re-initialised the top {reinit_top_layers} of {model.config.num_hidden_layers} encoder "
                     "layers and the pooler")
    return found, lines


def for_inference(model: keras.Model, output_dir: str, init_checkpoint: str | None) -> tuple[Checkpoint, list[str]]:
    """Loads every weight of `model` from the policy's choice (a one-line error when there is
    none)."""
    found = training_states.choose_weights(output_dir, init_checkpoint, training=False)
    report = training_states.load_weights(model, found, strict=True)
    return found, described(model, found, report, output_dir)


def best(model: keras.Model, output_dir: str, last_step: int | None = None) -> tuple[Checkpoint | None, list[str]]:
    """Loads the run's best checkpoint (OUTPUT_DIR/best/) when it kept one (None and no line
    when it did not); `last_step`: where training ended, for the line."""
    record = best_checkpoint.read_record(output_dir)
    if record is None:
        return None, []
    step = int(record["step"])
    found = Checkpoint(best_checkpoint.checkpoint_prefix(output_dir, step), training_states.TF1_KIND, step)
    training_states.load_weights(model, found, strict=True)
    ended = "" if last_step is None else f"; training ended at step {last_step}"
    return found, [f"weights: the best checkpoint {found.prefix} ({record['metric']} {record['value']:.4f} at "
                   f"step {step}{ended})"]


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
