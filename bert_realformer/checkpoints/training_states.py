"""Which weights a run starts from, and the checkpoints around training.

Two kinds of checkpoint:
* a training state, `OUTPUT_DIR/training_state/ckpt-N`: the weights under their TF1 names plus
  the optimizer and the loop's state (`tf.train.Checkpoint`), what a run resumes from;
* a TF1 name-based checkpoint: Google's, HFL's or the RealFormer authors' releases, and the
  `OUTPUT_DIR/model.ckpt-N` every run exports at its end.

The weights policy, the same for every script and mode (`choose_weights`): the latest training
state or `model.ckpt-N` in the output directory (the higher step; the training state on a
tie); else `--init_checkpoint` (a TF1 checkpoint, one of ours, a run's output directory, a
Hugging Face model directory or a KerasHub preset); else fresh weights for training and an
error for eval/predict.
"""

import dataclasses
import json
import os
import re
from collections.abc import Sequence

import tensorflow as tf

import modeling
from bert_realformer import storage
from bert_realformer.checkpoints import formats, state_recovery
from bert_realformer.checkpoints.config_files import check_shapes_agree
from bert_realformer.checkpoints.formats import ReadOptions, WeightFormat, register
from bert_realformer.checkpoints.tf1 import (
    CheckpointError,
    assign_named_values,
    checkpoint_keys,
    checkpoint_shapes,
    load_tf1_checkpoint,
    read_checkpoint_tensors,
    read_run_weights,
    resolve_checkpoint_path,
    write_config_beside,
)
from bert_realformer.errors import InputError
from modeling.bert import block_names
from modeling.lora import SCALE, fold_factors

TRAINING_STATE = "training_state"
TRAINING_STATE_KIND = "training state"
TF1_KIND = "TF1 checkpoint"
_STEP = re.compile(r"-(\d+)$")
_LAYER = re.compile(r"layer_\d+")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint prefix, its kind (`TRAINING_STATE_KIND`, `TF1_KIND`, or another format's
    title) and step (0 if its name has none); `weight_format`: the registered format that reads
    it when it is neither (a Hugging Face directory, a KerasHub preset: `prefix` is the directory)."""
    prefix: str
    kind: str
    step: int
    weight_format: str | None = None


def named_variables(model):
    """The model's variables keyed by their TF1 names, a LoRA-adapted kernel's parts apart
    (`modeling.weight_variables`): what training-state checkpoints track (Keras 3 layers nested
    in layers are not tracked as checkpoint dependencies)."""
    return {name: variable.value for name, variable in modeling.weight_variables(model).items()}


def run_directory(prefix):
    """The directory a checkpoint prefix belongs to: a run's for its `training_state/ckpt-N`,
    else the prefix's own directory (a directory read as a whole, a Hugging Face model's, is
    its own)."""
    if storage.isdir(prefix):
        return prefix
    parent = os.path.dirname(prefix)
    return os.path.dirname(parent) if os.path.basename(parent) == TRAINING_STATE else parent


def step_of(prefix):
    """N of a `...-N` checkpoint prefix (0 when it has none)."""
    match = _STEP.search(prefix)
    return int(match.group(1)) if match else 0


def _training_states(directory):
    """The newest training state: the one the index names, else (no index, or one that cannot
    be read or names a state that is not there) the newest complete one on disk."""
    state_dir = os.path.join(directory, TRAINING_STATE)
    if not storage.isdir(state_dir):
        return None
    try:
        latest = tf.train.latest_checkpoint(state_dir)
    except Exception:  # (a garbled index: ValueError or a protobuf ParseError)
        latest = None
    if latest is None:
        steps = state_recovery.states_on_disk(state_dir)
        latest = os.path.join(state_dir, f"ckpt-{steps[-1]}") if steps else None
    return Checkpoint(latest, TRAINING_STATE_KIND, step_of(latest)) if latest else None


def _tf1_exports(directory):
    """The directory's `model.ckpt-N` of the highest N, or of the N its best record names."""
    recorded = _recorded_best(directory)
    if recorded is not None:
        return recorded
    steps = []
    for name in storage.listdir(directory):
        if name.startswith("model.ckpt-") and name.endswith(".index"):
            number = name[len("model.ckpt-"):-len(".index")]
            if number.isdigit():
                steps.append(int(number))
    if not steps:
        return None
    step = max(steps)
    return Checkpoint(os.path.join(directory, f"model.ckpt-{step}"), TF1_KIND, step)


def _recorded_best(directory):
    """The checkpoint a best checkpoint's directory records as the best (`formats.BEST_RECORD`),
    or None where it records none that is there."""
    path = os.path.join(directory, formats.BEST_RECORD)
    if not storage.isfile(path):
        return None
    try:
        step = int(json.loads(storage.read_bytes(path))["step"])
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{path}: expected a JSON object with the best checkpoint's step") from None
    prefix = os.path.join(directory, f"model.ckpt-{step}")
    return Checkpoint(prefix, TF1_KIND, step) if storage.exists(prefix + ".index") else None


def latest_in(directory):
    """The latest training state or `model.ckpt-N` export in a run directory, or None."""
    if not directory or not storage.isdir(directory):
        return None
    found = [c for c in (_training_states(directory), _tf1_exports(directory)) if c]
    return max(found, key=lambda c: (c.step, c.kind == TRAINING_STATE_KIND), default=None)


def resolve(path):
    """`--init_checkpoint` as a `Checkpoint`: a run directory (its latest), a training-state
    directory or prefix, or a TF1 checkpoint (prefix, or a directory with a `checkpoint` file),
    or a directory another format marks as its own (`formats.holding`)."""
    other = formats.holding(path)
    if other is not None:
        return Checkpoint(path, formats.get(other).title, 0, weight_format=other)
    if storage.isdir(path):
        found = latest_in(path)
        if found:
            return found
    prefix = resolve_checkpoint_path(path)
    names = checkpoint_keys(prefix)
    is_state = "_CHECKPOINTABLE_OBJECT_GRAPH" in names and any(n.startswith("variables/") for n in names)
    return Checkpoint(prefix, TRAINING_STATE_KIND if is_state else TF1_KIND, step_of(prefix))


def choose_weights(output_dir, init_checkpoint, training):
    """The checkpoint a run starts from (see the module docstring), or None for fresh
    weights (training only)."""
    found = latest_in(output_dir)
    if found:
        return found
    if init_checkpoint:
        return resolve(init_checkpoint)
    if training:
        return None
    raise InputError(f"no weights to evaluate or predict with: output_dir={output_dir} holds no "
                     "training state or model.ckpt-N and init_checkpoint is not set",
                     options=("output_dir", "init_checkpoint"))


def describe(checkpoint, report=None):
    """One line for the user: which weights, and what they did not cover (names of every
    layer folded into one: `layer_*`)."""
    if checkpoint is None:
        return "weights: freshly initialised (no checkpoint in --output_dir, no --init_checkpoint)"
    text = f"weights: {checkpoint.kind} {checkpoint.prefix} (step {checkpoint.step})"
    if report is not None:
        text += f", {len(report.loaded)} loaded{report.identity_note()}"
        if report.missing:
            text += f"; freshly initialised (not in it): {fold_layer_names(report.missing)}"
            heads = sorted({"/".join(name.split("/")[:2]) for name in report.missing if name.startswith("cls/")})
            if heads:
                text += f" (untrained heads: {', '.join(heads)})"
        if report.unexpected:
            text += f"; in it but unused: {fold_layer_names(report.unexpected)}"
    return text


def fold_layer_names(names, shown=6):
    """'a, b' for a few names; for more, the count and the names folded: layer numbers as
    `layer_*`, the weights of one layer as `{beta,gamma}`
    (`bert/encoder/layer_*/attention/LayerNorm/{beta,gamma}`), at most `shown` of them."""
    if len(names) <= shown:
        return ", ".join(names)
    leaves, layers = {}, {}
    for name in names:
        parent, _, leaf = _LAYER.sub("layer_*", name).rpartition("/")
        leaves.setdefault(parent, {})[leaf] = None
        layers.setdefault(parent, set()).update(_LAYER.findall(name))
    folded = []
    for parent, ends in leaves.items():
        if len(layers[parent]) == 1:  # one layer only: name it (`layer_*` would hide which)
            parent = parent.replace("layer_*", next(iter(layers[parent])))
        leaf = next(iter(ends)) if len(ends) == 1 else f"{{{','.join(ends)}}}"
        folded.append(f"{parent}/{leaf}" if parent else leaf)
    more = f", ... ({len(folded) - shown} more)" if len(folded) > shown else ""
    return f"{len(names)} weights: {', '.join(folded[:shown])}{more}"


AVERAGES = "averages/"  # the keys of a training state's weight averages (`finetuning.averaging`)
LORA_SCALE_KEY = f"{SCALE}/.ATTRIBUTES/VARIABLE_VALUE"  # (a LoRA run's, `finetuning.low_rank_adaptation`)


def read_training_state(path):
    """{TF1 name: array} of the model weights in our training state (a run or training-state
    directory, or a `ckpt-N` prefix). A run that kept moving averages of its weights
    (`finetuning.averaging`) is read as its averages: what it evaluated and exported; a LoRA
    run's adapted kernels are read merged (`modeling.lora.fold_factors`), as plain kernels."""
    state_dir = os.path.join(path, TRAINING_STATE)
    prefix = resolve_checkpoint_path(state_dir if storage.isdir(state_dir) else path)
    stored = read_checkpoint_tensors(prefix, keep=lambda key: _weight_name(key) is not None
                                     or _weight_name(key, AVERAGES) is not None or key == LORA_SCALE_KEY)
    values = {_weight_name(key): value for key, value in stored.items() if _weight_name(key) is not None}
    if not values:
        raise CheckpointError(f"{prefix}: not a training state written by our scripts")
    values.update({_weight_name(key, AVERAGES): value for key, value in stored.items()
                   if _weight_name(key, AVERAGES) is not None})
    if LORA_SCALE_KEY in stored:  # (a LoRA run's: its kernels as the model computed them)
        values = fold_factors(values, float(stored[LORA_SCALE_KEY]))
    return values


def _expected_shapes(config) -> dict[str, tuple[int, ...]]:
    """The shapes of a few weights every BERT of `config` has, by TF1 name (no model built)."""
    hidden, width = config.hidden_size, config.embedding_width
    scope, scopes = block_names(config, 0)
    query, intermediate = (f"{scope}/{scopes[role]}/kernel" for role in ("query", "intermediate"))
    return {"bert/embeddings/word_embeddings": (config.vocab_size, width),
            "bert/embeddings/position_embeddings": (config.max_position_embeddings, width),
            "bert/embeddings/token_type_embeddings": (config.type_vocab_size, width),
            query: (hidden, hidden), intermediate: (hidden, config.intermediate_size)}


def stored_weight_shapes(checkpoint: Checkpoint) -> dict[str, tuple[int, ...]]:
    """{TF1 name: shape} of the model weights a TF1 checkpoint or a training state holds (no
    optimizer slot, no step), read from its index alone."""
    stored = checkpoint_shapes(checkpoint.prefix)
    if checkpoint.kind == TRAINING_STATE_KIND:
        stored = {_weight_name(key): shape for key, shape in stored.items()}
    return {name: shape for name, shape in stored.items() if name}


def check_fits(checkpoint: Checkpoint, config, option: str = "init_checkpoint") -> None:
    """Before any work: an `InputError` when a weight of `checkpoint` has another shape than
    `config` gives it (another model's checkpoint, or another config's): read from its index
    alone, no weight loaded. (A directory of another format is checked as its weights load.)"""
    if checkpoint.weight_format is not None:
        return
    check_shapes_agree(checkpoint.prefix, stored_weight_shapes(checkpoint), _expected_shapes(config), option)


def load_weights(model, checkpoint, strict=False, needless: Sequence[str] = ()):
    """Loads a `Checkpoint`'s weights into `model`; returns the `LoadReport`. `strict`: every
    weight of the model must be in it (eval/predict never runs on random weights), but those
    named in `needless`, which the caller's use of the model never reads (a pooler, for
    features)."""
    if checkpoint.weight_format is not None:
        weights = formats.get(checkpoint.weight_format).read(checkpoint.prefix, ReadOptions(target="model"))
        report = assign_named_values(model, weights.values, checkpoint.prefix)
    elif checkpoint.kind == TRAINING_STATE_KIND:
        report = assign_named_values(
            model, read_training_state(checkpoint.prefix), checkpoint.prefix)
    else:
        report = load_tf1_checkpoint(model, checkpoint.prefix)
    needed = [name for name in report.missing if name not in needless]
    if strict and needed and any(name.startswith("bert/") for name in needed):
        raise CheckpointError(f"{checkpoint.prefix} lacks weights of the encoder: {', '.join(needed)} (another "
                              "model's checkpoint?)")
    if strict and needed:
        raise CheckpointError(
            f"{checkpoint.prefix} lacks weights the model needs: {', '.join(needed)} "
            "(a pretrained checkpoint without this task's head? train with do_train first)", options=("do_train",))
    return report


def check_training_state_matches(model, prefix):
    """A training state must hold exactly the model's weights (resuming a Post-LN run as
    Pre-LN would otherwise leave LayerNorms random)."""
    saved = {_weight_name(key) for key in checkpoint_keys(prefix)} - {None}
    if not saved:
        raise CheckpointError(f"{prefix}: not a training state written by our scripts")
    expected = set(modeling.weight_variables(model))
    if saved != expected:
        missing, unexpected = sorted(expected - saved), sorted(saved - expected)
        raise CheckpointError(
            f"{prefix} does not match the model (another config or layer_norm_type?): "
            f"missing {', '.join(missing) or 'nothing'}; unexpected {', '.join(unexpected) or 'nothing'}",
            options=("layer_norm_type",))


def _weight_name(key, prefix="variables/"):
    """The TF1 name of a model weight's key in a training state (of its moving average with
    `prefix=AVERAGES`), None for other keys."""
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    if not (key.startswith(prefix) and key.endswith(suffix)):
        return None
    return _unescape(key[len(prefix):-len(suffix)])


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


def write_training_state(values, directory):
    """Writes {TF1 name: array} as a training state (weights only) in `directory/training_state`,
    which the scripts resume from or take as --init_checkpoint."""
    variables = {name: tf.Variable(value) for name, value in values.items()}
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(variables=variables),
                                         os.path.join(directory, TRAINING_STATE), max_to_keep=1)
    return manager.save(checkpoint_number=0)


def _escape(name):
    """A name as a tf.train.Checkpoint dict key ('/' as '.S', '.' as '..'): `_unescape`'s inverse."""
    return name.replace(".", "..").replace("/", ".S")


@register
class TrainingStateFormat(WeightFormat):
    """Our training states (`DIR/training_state/ckpt-N`: a run directory, its training_state, or a
    `ckpt-N` prefix), the weights under their TF1 names; written weights-only, which the scripts
    resume from or take as --init_checkpoint."""
    name = "ours"

    def read(self, path, options):
        return read_run_weights(path, options, read_training_state)

    def write(self, directory, weights, options):
        written = os.path.relpath(write_training_state(weights.values, directory), directory)
        return [written, *write_config_beside(directory, weights)]

    def names(self, config):
        return {name: f"variables/{_escape(name)}/.ATTRIBUTES/VARIABLE_VALUE"
                for name in modeling.tf1_variable_map(modeling.BertModel(config))}
