"""TF1 name-based checkpoints (Google BERT, HFL, official RealFormer): read and write.

Names come from `modeling.tf1_variable_map(model)`, which each model class declares
(`tf1_names`): the original code's names for Post-LN and RealFormer; Pre-LN, which has no
original, names its LayerNorms after the input they normalise (`layer_N/attention/LayerNorm`,
`layer_N/intermediate/LayerNorm`, and the final one `bert/encoder/LayerNorm`).

TensorFlow is imported only inside the functions that touch checkpoint files.
"""

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping

import keras
import numpy as np

from bert_realformer import storage
from bert_realformer.checkpoints.config_files import read_config, write_config
from bert_realformer.checkpoints.formats import (
    CONFIG_FILE,
    ReadOptions,
    WeightFormat,
    Weights,
    found_beside,
    labels_beside,
    multi_label_beside,
    name_list,
    own_vocabulary,
    register,
    write_vocab_and_labels,
)
from bert_realformer.checkpoints.hf_family import POOLER_WEIGHTS
from bert_realformer.errors import InputError
from modeling.bert import BertModel
from modeling.config import BertConfig
from modeling.models import tf1_variable_map

# Optimizer slots and bookkeeping that a TF1 training checkpoint also holds.
_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")
_IGNORED_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH")
# google-research/albert projects the embeddings to the layers' width only where they are narrower:
# its checkpoint of a model whose `embedding_size` equals `hidden_size` holds no projection, which
# is the identity in the function it computes (a Hugging Face `AlbertModel` always has one).
EMBEDDING_PROJECTION = "bert/encoder/embedding_hidden_mapping_in"
_IDENTITY_REASON = "embeddings as wide as the layers, which google-research/albert does not project"


class CheckpointError(InputError):
    """A checkpoint is missing, unreadable, or does not fit the model (one-line message)."""


class DamagedCheckpoint(CheckpointError):
    """The files of checkpoint `prefix` cannot be read: missing, cut short or corrupt."""

    def __init__(self, prefix: str, message: str):
        super().__init__(message)
        self.prefix = prefix


@dataclasses.dataclass
class LoadReport:
    """What `load_tf1_checkpoint` did: TF1 names loaded, missing from the file, and unexpected."""
    path: str
    loaded: list
    missing: list
    unexpected: list
    identity: list = dataclasses.field(default_factory=list)  # (`identity_projection`: loaded as such)

    def identity_note(self) -> str:
        """What was loaded as the identity (`identity_projection`), for a line about the load; ''
        if nothing was."""
        if not self.identity:
            return ""
        return f" ({EMBEDDING_PROJECTION} as the identity: {_IDENTITY_REASON})"

    def summary(self) -> str:
        text = f"{self.path}: loaded {len(self.loaded)} variables{self.identity_note()}"
        if self.missing:
            text += f"; {len(self.missing)} not in the checkpoint (freshly initialised): " + \
                    ", ".join(self.missing)
        if self.unexpected:
            text += f"; {len(self.unexpected)} in the checkpoint but unused: " + \
                    ", ".join(self.unexpected)
        return text


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint prefix from a prefix or a directory (its latest checkpoint)."""
    import tensorflow as tf
    path = os.fspath(path)
    if storage.isdir(path):
        storage.check_readable_dir(path)
        if storage.exists(os.path.join(path, "checkpoint")):
            storage.read_bytes(os.path.join(path, "checkpoint"))  # (unreadable: said, not "no checkpoint")
        latest = tf.train.latest_checkpoint(path)
        if latest is None and storage.isfile(os.path.join(path, "config.json")):
            raise CheckpointError(f"{path}: holds config.json but no model.safetensors (a Hugging Face model "
                                  "directory holds both), and no TF1 checkpoint")
        if latest is None:
            raise CheckpointError(f"{path}: directory holds no checkpoint (no 'checkpoint' file "
                                  "or no *.index)")
        return latest
    if not storage.exists(path + ".index"):
        if storage.isdir(os.path.dirname(path) or "."):  # (but unreadable: said as such)
            storage.check_readable_dir(os.path.dirname(path) or ".")
        raise CheckpointError(f"{path}: no TF1 checkpoint found (expected {path}.index)")
    return path


def _is_ignored(name):
    return name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES)


@contextlib.contextmanager
def reading_checkpoint(prefix: str) -> Iterator[None]:
    """Around code that reads the files of checkpoint `prefix`: TensorFlow's errors for a
    missing, truncated or damaged `.index`/`.data-*` file become one `CheckpointError`
    naming the prefix."""
    import tensorflow as tf
    try:
        yield
    except CheckpointError:
        raise
    except (tf.errors.OpError, ValueError, IndexError) as error:  # IndexError: a file cut short
        reason = error.message if hasattr(error, "message") else error
        raise DamagedCheckpoint(prefix, f"{prefix}: cannot read checkpoint ({reason})") from None


def read_checkpoint_tensors(prefix: str, keep: Callable[[str], bool] = lambda key: True) -> dict[str, np.ndarray]:
    """{key: numpy array} of the tensors stored in checkpoint `prefix` whose key `keep`
    accepts, every one read (so a damaged file is found here, as a `CheckpointError`)."""
    with reading_checkpoint(prefix):
        reader = _reader(prefix)
        return {key: reader.get_tensor(key)
                for key in sorted(reader.get_variable_to_shape_map()) if keep(key)}


def checkpoint_shapes(prefix: str) -> dict[str, tuple[int, ...]]:
    """{key: shape} of the tensors stored in checkpoint `prefix`, from its index alone."""
    with reading_checkpoint(prefix):
        return {key: tuple(shape) for key, shape in _reader(prefix).get_variable_to_shape_map().items()}


def checkpoint_keys(prefix: str) -> set[str]:
    """The keys stored in checkpoint `prefix` (its index), a `CheckpointError` if unreadable."""
    with reading_checkpoint(prefix):
        return set(_reader(prefix).get_variable_to_shape_map())


def _reader(prefix):
    """TensorFlow's reader of checkpoint `prefix`, taken as a prefix (`tf.train.load_checkpoint`
    would first ask whether it is a directory, which some filesystems answer by name prefix)."""
    import tensorflow as tf
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def read_tf1_checkpoint(path: str) -> dict[str, np.ndarray]:
    """{name: numpy array} of every model variable in a TF1 checkpoint (slots skipped)."""
    return read_checkpoint_tensors(resolve_checkpoint_path(path), keep=lambda name: not _is_ignored(name))


def load_tf1_checkpoint(model: keras.Model, path: str) -> LoadReport:
    """Loads `bert/*` and any heads of `model` present in a TF1 checkpoint.

    Args:
      model: a `BertModel`, or any model of `modeling` that keeps one as `.bert`, with its head.
      path: checkpoint prefix (`.../bert_model.ckpt`) or a directory.
    Returns:
      `LoadReport` with the names loaded, missing from the checkpoint (left as initialised)
      and unexpected (in the checkpoint, not in the model). Optimizer slots and
      `global_step` are ignored.
    Raises:
      CheckpointError: no checkpoint there, or a shape differs (both shapes in the message).
    """
    prefix = resolve_checkpoint_path(path)
    values = read_tf1_checkpoint(prefix)
    identity = identity_projection(values, model.config)
    report = assign_named_values(model, {**values, **identity}, prefix)
    report.identity = sorted(identity)
    return report


def identity_projection(values: Mapping[str, np.ndarray], config: BertConfig) -> dict[str, np.ndarray]:
    """The embedding projection a google-research/albert checkpoint leaves out
    (`EMBEDDING_PROJECTION`), as the identity: {kernel [H, H]: I, bias [H]: 0} when `config`'s
    `embedding_size` equals its `hidden_size` and `values` holds the embeddings but no projection;
    else {}."""
    kernel = f"{EMBEDDING_PROJECTION}/kernel"
    if config.embedding_size != config.hidden_size or kernel in values or \
            "bert/embeddings/word_embeddings" not in values:
        return {}
    return {kernel: np.eye(config.hidden_size, dtype=np.float32),
            f"{EMBEDDING_PROJECTION}/bias": np.zeros(config.hidden_size, np.float32)}


def assign_named_values(model: keras.Model, values: Mapping[str, np.ndarray], source: str,
                        options: tuple[str, ...] = ()) -> LoadReport:
    """Assigns {TF1 name: array} to the model's variables of those names (see
    `load_tf1_checkpoint`); `source` names the values in the report and in errors (`options`:
    the options it names, see `InputError`)."""
    variables = tf1_variable_map(model)
    for name, variable in variables.items():
        if name in values and tuple(values[name].shape) != tuple(variable.shape):
            raise CheckpointError(
                f"{source}: {name} has shape {list(values[name].shape)} in the checkpoint but "
                f"{list(variable.shape)} in the model", options=options)
    loaded = []
    for name, variable in variables.items():
        if name in values:
            variable.assign(values[name].astype(variable.dtype))
            loaded.append(name)
    missing = [name for name in variables if name not in values]
    unexpected = [name for name in values if name not in variables]
    return LoadReport(source, loaded, missing, unexpected)


def save_tf1_checkpoint(model: keras.Model, prefix: str, state_file: bool = True) -> str:
    """Writes the model's variables under their TF1 names (see `write_tf1_checkpoint`)."""
    return write_tf1_checkpoint({name: keras.ops.convert_to_numpy(variable)
                                 for name, variable in tf1_variable_map(model).items()}, prefix, state_file)


def write_tf1_checkpoint(values: Mapping[str, np.ndarray], prefix: str, state_file: bool = True) -> str:
    """Writes {TF1 name: array} as `prefix.index` / `prefix.data-*`, plus (with `state_file`) a
    `checkpoint` state file naming it, so the original code (`tf.train.init_from_checkpoint`) and
    `load_tf1_checkpoint` can restore it. Files are written under a temporary prefix first and
    renamed, so an interrupted save leaves no half-written checkpoint. Returns `prefix`."""
    import tensorflow as tf
    prefix = os.fspath(prefix)
    directory = os.path.dirname(prefix) or "."
    storage.makedirs(directory)
    names = sorted(values)
    tmp_prefix = f"{prefix}.tmp{os.getpid()}"
    try:
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.convert_to_tensor(values[n]) for n in names])
        data_files = storage.glob(f"{tmp_prefix}.data-*")
    except (tf.errors.OpError, OSError) as error:  # (a read-only or full disk: nothing of it left)
        for path in storage.glob(f"{tmp_prefix}*"):
            with contextlib.suppress(OSError, tf.errors.OpError):
                storage.remove(path)
        raise storage.write_error(error, prefix) from None
    for data_file in data_files:  # data first, index last: the index makes the checkpoint exist
        storage.rename(data_file, prefix + data_file[len(tmp_prefix):])
    storage.rename(f"{tmp_prefix}.index", f"{prefix}.index")
    if state_file:
        write_checkpoint_state(directory, os.path.basename(prefix))
    return prefix


def write_checkpoint_state(directory: str, basename: str) -> None:
    """DIRECTORY/checkpoint naming `basename` as the latest checkpoint there."""
    storage.write_atomic(os.path.join(directory, "checkpoint"),
                         f'model_checkpoint_path: "{basename}"\nall_model_checkpoint_paths: "{basename}"\n')


WEIGHT_FILES = ("tf1", "hf")  # the targets that hold weights as they are, a missing one missing there too
# Where a missing pooler (a Hugging Face class built without one) loses nothing: weights files go
# on without it, and a model being trained starts it fresh and says so (evaluation refuses it).
POOLER_OPTIONAL = (*WEIGHT_FILES, "model")


def missing_encoder_weights(values: Mapping[str, np.ndarray], config: BertConfig) -> list[str]:
    """The encoder weights `config` implies that `values` lacks (heads are optional); a shape
    that differs from the config's is a `CheckpointError` naming both."""
    return assign_named_values(BertModel(config), values, "input", options=("input",)).missing


def read_run_weights(path: str, options: ReadOptions, read_values: Callable[[str], dict]) -> Weights:
    """The weights `read_values(path)` reads, with the config, vocabulary and labels beside them
    (or where `options` says): what a TF1 checkpoint and a training state share."""
    config_file = options.config_file or found_beside(path, CONFIG_FILE)
    if config_file is None:
        raise InputError(f"bert_config_file is needed: no {CONFIG_FILE} beside {path}", options=("bert_config_file",))
    config = read_config(config_file)
    values = read_values(path)
    identity = identity_projection(values, config)
    values = {**values, **identity}
    missing = missing_encoder_weights(values, config)
    # (converted from a Hugging Face class that has no pooler)
    pooler = [name for name in missing if name in POOLER_WEIGHTS] if options.target in POOLER_OPTIONAL else []
    missing = [name for name in missing if name not in pooler]
    if missing:
        raise InputError(f"input: {len(missing)} weights of this config are missing: {name_list(missing)}",
                         options=("input",))
    weights = Weights(config, values, options.vocab_file or own_vocabulary(path), labels_beside(path),
                      multi_label_beside(path))
    if pooler:
        weights.notes.append(f"bert/pooler/dense: not in {path}")
    if identity:
        weights.notes.append(f"{EMBEDDING_PROJECTION}: not in {path}, the identity ({_IDENTITY_REASON})")
    return weights


def write_config_beside(directory: str, weights: Weights) -> list[str]:
    """The config, vocabulary and labels written beside weights in `directory`."""
    write_config(weights.config, os.path.join(directory, CONFIG_FILE))
    return [CONFIG_FILE, *write_vocab_and_labels(directory, weights)]


@register
class Tf1Format(WeightFormat):
    """TF1 name-based checkpoints, as Google's, HFL's and the RealFormer authors' releases and
    every run's `model.ckpt-N`: DIR/bert_model.ckpt.* with bert_config.json (and vocab.txt)."""
    name = "tf1"

    def read(self, path, options):
        return read_run_weights(path, options, read_tf1_checkpoint)

    def write(self, directory, weights, options):
        write_tf1_checkpoint(weights.values, os.path.join(directory, "bert_model.ckpt"))
        written = ["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"]
        return [*written, *write_config_beside(directory, weights)]

    def names(self, config):
        return {name: name for name in tf1_variable_map(BertModel(config))}
