"""One loader for every weight format: a model with its weights from a path, whatever it holds.

    from bert_realformer.checkpoints import from_pretrained
    encoder = from_pretrained("chinese_roberta_wwm_ext")                 # a TF1 release's directory
    model = from_pretrained("hf_dir", task="classifier", num_labels=15)  # a Hugging Face directory
    model = from_pretrained("runs/tnews/best", task="classifier")        # a run's best checkpoint
    model = from_pretrained("chinese_roberta_wwm_ext", residual_attention="sum")  # continued as RealFormer

What a path holds: a Hugging Face directory (config.json and model.safetensors),
a KerasHub preset (config.json and metadata.json), a run directory of this project (its latest
training state or `model.ckpt-N`), a run's `best/` or `training_state/`, a TF1 checkpoint (its
prefix, or a directory with its `checkpoint` file and `bert_config.json` beside it). The weights
are read by the format's own reader (`formats.get(...).read`), under the original TF1 names, and
assigned to the model `task` names (`TASKS`); the weights the model has and the path lacks (a new
head) and those it holds that the model does not use are logged, as the scripts' `weights:` line
says them, and raise with `strict=True`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType

import keras

import modeling
from bert_realformer.checkpoints import formats, training_states
from bert_realformer.checkpoints.formats import ReadOptions, Weights
from bert_realformer.checkpoints.tf1 import CheckpointError, LoadReport, assign_named_values
from bert_realformer.errors import InputError

logger = logging.getLogger(__name__)

def read_pretrained(path: str, config_file: str | None = None, vocab_file: str | None = None) -> Weights:
    """The weights at `path` under their TF1 names, with the config and vocabulary beside them
    (or `config_file`, `vocab_file`), read by the format of what `path` holds (a directory a
    format marks as its own, `formats.holding`; else `training_states.resolve`: a training state
    or a TF1 checkpoint). A run directory gives its latest weights."""
    if not formats.checkpoint_exists(path):
        raise InputError(f"{path}: no such file or directory")
    kind, prefix = format_of(path)
    return formats.get(kind).read(prefix, ReadOptions(config_file, vocab_file, target="model"))


def format_of(path: str) -> tuple[str, str]:
    """(the name of the weight format that reads `path`, the path to give it): a directory a
    format marks as its own (`formats.holding`), else what `training_states.resolve` finds (a
    run's latest weights, a training state, a TF1 checkpoint)."""
    checkpoint = training_states.resolve(path)
    kind = checkpoint.weight_format or ("ours" if checkpoint.kind == training_states.TRAINING_STATE_KIND else "tf1")
    return kind, checkpoint.prefix


def _classifier(config: modeling.BertConfig, weights: Weights, num_labels: int | None = None, **kwargs):
    held = weights.values.get("output_weights")
    if num_labels is None and held is None:
        raise InputError("task=classifier: num_labels is needed (the weights hold no classifier)",
                         options=("num_labels",))
    return modeling.BertClassifier(config, num_labels if num_labels is not None else held.shape[0], **kwargs)


def _pretrainer(config: modeling.BertConfig, weights: Weights, next_sentence: bool | None = None, **kwargs):
    if next_sentence is None:
        next_sentence = "cls/seq_relationship/output_bias" in weights.values
    return modeling.BertPretrainer(config, next_sentence=next_sentence, **kwargs)


def _token_classifier(config: modeling.BertConfig, weights: Weights, num_labels: int | None = None,
                      crf: bool | None = None, **kwargs):
    held = weights.values.get("cls/ner/output_weights")
    if num_labels is None and held is None:
        raise InputError("task=token_classifier: num_labels is needed (the weights hold no tagging head)",
                         options=("num_labels",))
    crf = "cls/ner/transitions" in weights.values if crf is None else crf
    return modeling.BertTokenClassifier(config, num_labels if num_labels is not None else held.shape[0], crf=crf,
                                        **kwargs)


# task -> (config, weights, **task_args) -> the model. Its head's size defaults to the weights'.
TASKS: Mapping[str | None, Callable[..., keras.Model]] = MappingProxyType({
    None: lambda config, weights, **kwargs: modeling.BertModel(config, **kwargs),
    "pretrainer": _pretrainer,
    "classifier": _classifier,
    "span_labeler": lambda config, weights, **kwargs: modeling.BertSpanLabeler(config, **kwargs),
    "token_classifier": _token_classifier,
    "multiple_choice": lambda config, weights, **kwargs: modeling.BertMultipleChoice(config, **kwargs),
})


def from_pretrained(path: str, task: str | None = None, *, config_file: str | None = None,
                    layer_norm_type: str | None = None, residual_attention: str | None = None,
                    strict: bool = False, **task_args) -> keras.Model:
    """The model `task` names (None: the encoder, `modeling.BertModel`; `TASKS`), built from
    the config at `path` (or `config_file`; `layer_norm_type` and `residual_attention` override
    its variant) and given the weights there (`read_pretrained`). `task_args` go to the model
    (`num_labels=...`; a head's size defaults to the one the weights hold). What the model has
    and the weights lack (a warning: those weights are random) and what the weights hold and the
    model does not use are logged; `strict`: a `CheckpointError` instead."""
    if task not in TASKS:
        raise InputError(f"task={task!r}: expected one of {', '.join(repr(name) for name in TASKS)}",
                         options=("task",))
    weights = read_pretrained(path, config_file)
    for note in weights.notes:  # (what the reading supplied or left out)
        logger.info(note)
    overrides = {key: value for key, value in (("layer_norm_type", layer_norm_type),
                                                ("residual_attention", residual_attention)) if value is not None}
    config = weights.config.replace(**overrides) if overrides else weights.config
    model = TASKS[task](config, weights, **task_args)
    report = assign_named_values(model, weights.values, path)
    line = loaded_line(report)
    if strict and (report.missing or report.unexpected):
        raise CheckpointError(line, options=("strict",))
    (logger.warning if report.missing else logger.info)(line)  # (unused weights change nothing)
    return model


def loaded_line(report: LoadReport) -> str:
    """What a load did, in one line: the weights loaded, those freshly initialised (not in the
    checkpoint) and those unused, each list folded (`training_states.fold_layer_names`)."""
    text = f"{report.path}: {len(report.loaded)} weights loaded"
    if report.missing:
        text += f"; freshly initialised (not in it): {training_states.fold_layer_names(report.missing)}"
    if report.unexpected:
        text += f"; in it but unused: {training_states.fold_layer_names(report.unexpected)}"
    return text
