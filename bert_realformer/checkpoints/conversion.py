"""A model's weights from one format to another: TF1 (`tf1`: Google's, HFL's and the RealFormer
authors' releases, every run's `model.ckpt-N`), a run's training state (`ours`), Hugging Face
(`hf`) and KerasHub presets (`kerashub`). `read` gives the weights under their TF1 names with
the config, vocabulary and a classifier's labels found beside them; `write` puts them into a
directory in the target format. What a format cannot hold is refused unless `force`, and then
listed in `notes` (the caller shows them).

    weights = conversion.read("hf", "hf_model_dir", target="tf1")
    written = conversion.write("tf1", "out_dir", weights)
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

import modeling
from bert_realformer import storage
from bert_realformer.checkpoints import huggingface, kerashub
from bert_realformer.checkpoints.huggingface import name_list
from bert_realformer.checkpoints.tf1 import assign_named_values, read_tf1_checkpoint, write_tf1_checkpoint
from bert_realformer.checkpoints.training_states import TRAINING_STATE, read_training_state, write_training_state
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_lines

SOURCES = ("tf1", "ours", "hf", "kerashub")
TARGETS = ("tf1", "ours", "hf", "kerashub")


@dataclasses.dataclass
class Weights:
    """What a conversion carries: the config, {TF1 name: array}, the vocabulary file (or None),
    a classifier's labels in their order (or None) and notes on what was left out."""
    config: modeling.BertConfig
    values: dict[str, np.ndarray]
    vocab_file: str | None = None
    labels: list[str] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


def read(kind: str, path: str, config_file: str | None = None, vocab_file: str | None = None,
         force: bool = False, target: str | None = None) -> Weights:
    """The weights at `path` in format `kind`. `config_file` and `vocab_file` default to the
    files beside `path`; `target` is where they go (Hugging Face weights missing from the config
    can go to tf1 and hf with `force`, not into a model that would keep random weights)."""
    if not storage.exists(path) and not storage.exists(path + ".index"):
        raise InputError(f"--input={path}: no such file or directory")
    if kind == "kerashub":
        config, values, vocab = kerashub.read_preset(path)
        return Weights(config, values, vocab_file or vocab)
    if kind == "hf":
        return _read_hf(path, vocab_file, force, target)
    config_file = config_file or _beside(path, "bert_config.json")
    if config_file is None:
        raise InputError(f"--bert_config_file is needed: no bert_config.json beside {path}")
    config = modeling.BertConfig.from_json_file(config_file)
    values = read_tf1_checkpoint(path) if kind == "tf1" else read_training_state(path)
    missing = missing_encoder_weights(values, config)
    if missing:
        raise InputError(f"--input: {len(missing)} weights of this config are missing: {name_list(missing)}")
    labels_file = _beside(path, "label_list.txt")  # a classifier run's label order
    labels = [line.rstrip("\r\n") for _, line in read_lines(labels_file) if line.strip()] if labels_file else None
    return Weights(config, values, vocab_file or _beside(path, "vocab.txt"), labels)


def _read_hf(path, vocab_file, force, target):
    config, values, vocab, unused, labels = huggingface.read_hf_dir(path)
    weights = Weights(config, values, vocab_file or vocab, labels)
    if unused:
        _refuse_unless_forced(weights, force, f"{len(unused)} weights of --input have no BERT equivalent and "
                              f"would be dropped: {name_list(unused)}", "not converted (no BERT equivalent)", unused)
    missing = missing_encoder_weights(values, config)
    if missing:
        message = f"--input: {len(missing)} weights of this config are missing: {name_list(missing)}"
        if target not in ("tf1", "hf"):  # the model would keep random weights in their place
            raise InputError(message)
        _refuse_unless_forced(weights, force, message, "missing from the input and so from the output", missing)
    return weights


def _refuse_unless_forced(weights, force, message, forced_note, names):
    if not force:
        raise InputError(f"{message}; pass --force to convert without them")
    weights.notes.append(f"{forced_note}: {', '.join(names)}")


# A run's directories of weights whose config, vocabulary and labels the run keeps beside them:
# its training state and its best checkpoint (`training.best_checkpoint.BEST_DIR`).
RUN_WEIGHT_DIRECTORIES = (TRAINING_STATE, "best")


def _beside(path, name):
    """File `name` in the directory of `path` (a directory, or a checkpoint prefix in one); for
    a run's `training_state` or `best` directory, in the run directory where the run keeps its
    files."""
    directory = (path if storage.isdir(path) else os.path.dirname(path)).rstrip("/")
    directories = [directory]
    if os.path.basename(directory) in RUN_WEIGHT_DIRECTORIES:
        directories.append(os.path.dirname(directory))
    for candidate in (os.path.join(d, name) for d in directories):
        if storage.isfile(candidate):  # (one look per place: each may be a remote call)
            return candidate
    return None


def missing_encoder_weights(values: dict[str, np.ndarray], config: modeling.BertConfig) -> list[str]:
    """The encoder weights `config` implies that `values` lacks (heads are optional); a shape
    that differs from the config's is a `CheckpointError` naming both."""
    return assign_named_values(modeling.BertModel(config), values, "--input").missing


def describe(weights: Weights) -> str:
    """'N weights (L layers, hidden H, <variant>)': what was converted, in one phrase."""
    config = weights.config
    return (f"{len(weights.values)} weights ({config.num_hidden_layers} layers, hidden {config.hidden_size}, "
            f"{config.layer_norm_type}-LN, residual_attention={config.residual_attention})")


def model_for(weights: Weights):
    """The model class whose weights `weights` holds (a classifier, a pretrainer with or
    without NSP, else the encoder), with them loaded."""
    values, config = weights.values, weights.config
    if "output_weights" in values:  # a fine-tuned classifier (its MLM/NSP heads, if kept, are not served)
        model = modeling.BertClassifier(config, num_labels=values["output_weights"].shape[0])
    elif "cls/predictions/output_bias" in values:
        model = modeling.BertPretrainer(config, next_sentence="cls/seq_relationship/output_bias" in values)
    else:
        model = modeling.BertModel(config)
    assign_named_values(model, values, "--input")
    return model


def write(kind: str, directory: str, weights: Weights, do_lower_case: bool = True, max_seq_length: int = 128,
          force: bool = False) -> list[str]:
    """Writes `weights` into `directory` in format `kind` (KerasHub's preprocessor gets
    `max_seq_length`; Hugging Face's and KerasHub's tokenizers `do_lower_case`); returns what
    was written, for the user. What the target has no place for is refused unless `force`
    (then noted in `weights.notes`)."""
    config, values, vocab, labels = weights.config, weights.values, weights.vocab_file, weights.labels
    if kind == "tf1":
        write_tf1_checkpoint(values, os.path.join(directory, "bert_model.ckpt"))
        config.to_json_file(os.path.join(directory, "bert_config.json"))
        written = ["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json"]
    elif kind == "ours":
        written = [os.path.relpath(write_training_state(values, directory), directory)]
        config.to_json_file(os.path.join(directory, "bert_config.json"))
        written.append("bert_config.json")
    elif kind == "hf":
        architecture, left_out = huggingface.write_hf_dir(directory, config, values, vocab, force, labels,
                                                          do_lower_case)
        if left_out:
            weights.notes.append(f"not converted (no place in {architecture}): {', '.join(left_out)}")
        written = [f"config.json ({architecture})", "model.safetensors"]
        return written + (["vocab.txt and the tokenizer's files"] if vocab else [])
    else:
        if vocab is None:
            raise InputError("--to=kerashub needs --vocab_file (no vocab.txt beside --input)")
        preset, left_out = kerashub.write_preset(directory, config, values, vocab, do_lower_case, max_seq_length,
                                                 force)
        if left_out:
            weights.notes.append(f"not converted (no place in {preset}): {', '.join(left_out)}")
        return [f"a KerasHub {preset} preset"]
    if vocab:
        storage.write_atomic(os.path.join(directory, "vocab.txt"), storage.read_bytes(vocab))
        written.append("vocab.txt")
    if labels:
        storage.write_atomic(os.path.join(directory, "label_list.txt"), "".join(f"{label}\n" for label in labels))
        written.append("label_list.txt")
    return written
