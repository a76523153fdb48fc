"""Checkpoints around the training loop: initialising from a TF1 checkpoint or our training
state, saving and resuming training state, and the final TF1 export."""

import os
import sys

import tensorflow as tf

import modeling

TRAINING_STATE = "training_state"


def named_variables(model):
    """The model's variables keyed by their TF1 names: what training-state checkpoints track
    (Keras 3 layers nested in layers are not tracked as checkpoint dependencies)."""
    return {name: variable.value for name, variable in modeling.tf1_variable_map(model).items()}


def initialise(model, path):
    """Loads `path` into `model`: a TF1 name-based checkpoint (Google, HFL, RealFormer, our
    `model.ckpt-N`), or our training state (a `training_state` directory, an output directory
    holding one, or a `ckpt-N` prefix). Weights missing from it are listed on stderr."""
    state_dir = os.path.join(path, TRAINING_STATE)
    prefix = modeling.checkpoints.resolve_checkpoint_path(state_dir if os.path.isdir(state_dir) else path)
    names = dict(tf.train.list_variables(prefix))
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names and not any(n.startswith("bert/") for n in names):
        tf.train.Checkpoint(variables=named_variables(model)).restore(prefix).expect_partial()
        print(f"initialised the model from training state {prefix}", file=sys.stderr)
        return
    report = modeling.load_tf1_checkpoint(model, prefix)
    if report.missing:
        print(f"freshly initialised (not in {prefix}): {', '.join(report.missing)}", file=sys.stderr)


def training_state(model, optimizer, loop, directory, max_to_keep):
    """(checkpoint, manager) for the training state in `directory/training_state`; restores
    the latest one if there is one (then `manager.restored` is its path, else None)."""
    state = tf.train.Checkpoint(variables=named_variables(model), optimizer=optimizer,
                                loss_scale=loop.loss_scale, good_steps=loop.good_steps)
    manager = tf.train.CheckpointManager(state, os.path.join(directory, TRAINING_STATE),
                                         max_to_keep=max_to_keep)
    manager.restored = None
    if manager.latest_checkpoint:
        state.restore(manager.latest_checkpoint)
        manager.restored = manager.latest_checkpoint
    return state, manager
