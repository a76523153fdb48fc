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


def latest_exported_step(directory):
    """The largest N of the `model.ckpt-N` TF1 exports in `directory` (0 if none)."""
    steps = []
    for name in os.listdir(directory):
        if name.startswith("model.ckpt-") and name.endswith(".index"):
            number = name[len("model.ckpt-"):-len(".index")]
            if number.isdigit():
                steps.append(int(number))
    return max(steps, default=0)


def _unescape(key):
    """A tf.train.Checkpoint dict key back to the name ('.S' was '/', '..' was '.')."""
    out, i = [], 0
    while i < len(key):
        if key[i] == "." and i + 1 < len(key):
            out.append("/" if key[i + 1] == "S" else key[i + 1])
            i += 2
        else:
            out.append(key[i])
            i += 1
    return "".join(out)


def read_training_state(path):
    """{TF1 name: array} of the model weights in our training state (dir or ckpt-N prefix)."""
    state_dir = os.path.join(path, TRAINING_STATE)
    prefix = modeling.checkpoints.resolve_checkpoint_path(state_dir if os.path.isdir(state_dir) else path)
    reader = tf.train.load_checkpoint(prefix)
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    values = {_unescape(key[len("variables/"):-len(suffix)]): reader.get_tensor(key)
              for key in reader.get_variable_to_shape_map()
              if key.startswith("variables/") and key.endswith(suffix)}
    if not values:
        raise modeling.CheckpointError(f"{prefix}: not a training state written by our scripts")
    return values


def write_training_state(values, directory):
    """Writes {TF1 name: array} as a training state (weights only) in `directory/training_state`,
    which run_pretraining.py / run_classifier.py resume from or take as --init_checkpoint."""
    variables = {name: tf.Variable(value) for name, value in values.items()}
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(variables=variables),
                                         os.path.join(directory, TRAINING_STATE), max_to_keep=1)
    return manager.save(checkpoint_number=0)
