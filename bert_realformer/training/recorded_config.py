"""The model config a run directory was trained with, and what a later run makes of it.

A training run writes the config it used (variant keys included) to `OUTPUT_DIR/bert_config.json`,
beside its checkpoints, as the released checkpoints carry theirs. A later run on the directory
(eval, predict, export, resume) whose config differs in a size stops (the weights would not
fit); one that differs in the variant (`layer_norm_type`, `residual_attention`) runs, with a
warning line (the same weights serve every variant). A run starting from another directory's
or a release's checkpoint gets one line naming the variant change (`variant_change`).
"""

import logging
import os

import modeling
from bert_realformer import storage
from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.checkpoints.training_states import run_directory
from bert_realformer.errors import InputError

FILE_NAME = "bert_config.json"
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "max_position_embeddings", "type_vocab_size", "position_offset", "layer_norm_eps", "embedding_size",
             "num_hidden_groups")
VARIANT_KEYS = ("layer_norm_type", "residual_attention")

logger = logging.getLogger(__name__)


def read(directory: str) -> modeling.BertConfig | None:
    """The config recorded in a run directory (or beside a release's checkpoint), or None."""
    path = os.path.join(directory, FILE_NAME)
    return read_config(path) if storage.isfile(path) else None


def record(config: modeling.BertConfig, directory: str) -> None:
    """Writes `config` to DIRECTORY/bert_config.json (atomically). A file there that already
    says the same (the user's own config file, say) is left as it is."""
    path = os.path.join(directory, FILE_NAME)
    try:
        recorded = read(directory)
    except InputError:  # (modeling.ConfigError too)
        recorded = None  # not a config: replaced
    if recorded is None or recorded.to_dict() != config.to_dict():
        storage.write_atomic(path, config.to_json_string())


def check_against_recorded(config: modeling.BertConfig, directory: str) -> str | None:
    """Compares the run's config with the one recorded in `directory`: a size that differs is
    an `InputError`; a variant that differs returns a warning line (None when they agree or
    nothing is recorded)."""
    recorded = read(directory)
    if recorded is None:
        return None
    path = os.path.join(directory, FILE_NAME)
    sizes = [f"{key} {getattr(config, key)} (recorded: {getattr(recorded, key)})"
             for key in SIZE_KEYS if getattr(config, key) != getattr(recorded, key)]
    if sizes:
        raise InputError(f"bert_config_file does not match the model trained in {directory}: "
                         f"{', '.join(sizes)}; use its {path}", options=("bert_config_file",))
    if config.variant.name != recorded.variant.name:
        return (f"warning: {directory} was trained as {recorded.variant.name} ({path}); this run uses "
                f"{config.variant.name} with the same weights")
    return None


def config_beside(prefix: str) -> modeling.BertConfig | None:
    """The config recorded beside a checkpoint prefix: in its directory (a release, a run's
    `model.ckpt-N`) or the run directory holding its `training_state/`; None if there is none."""
    directory = run_directory(prefix)
    try:
        return read(directory)
    except InputError as error:  # a stray unreadable file: no record
        logger.warning("ignoring %s: %s", os.path.join(directory, FILE_NAME), error)
        return None


def variant_change(config: modeling.BertConfig, prefix: str) -> str | None:
    """One line when the checkpoint at `prefix` was recorded as another variant than `config`
    (continued pretraining of a post-LN release as RealFormer, say), else None."""
    recorded = config_beside(prefix)
    if recorded is None or recorded.variant == config.variant:
        return None
    line = f"variant: {recorded.variant.name} checkpoint -> {config.variant.name}"
    if recorded.variant.pre_ln != config.variant.pre_ln:
        line += " (LayerNorms the checkpoint lacks start fresh)"
    return line
