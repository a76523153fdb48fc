"""A model's weights from one format to another (`formats`: TF1 (`tf1`: Google's, HFL's and the
RealFormer authors' releases, every run's `model.ckpt-N`), a run's training state (`ours`),
Hugging Face (`hf`), KerasHub presets (`kerashub`)). `read` gives the weights under their TF1
names with the config, vocabulary and a classifier's labels found beside them; `write` puts
them into a directory in the target format. What a format cannot hold is refused unless
`force`, and then listed in `notes` (the caller shows them).

    weights = conversion.read("hf", "hf_model_dir", target="tf1")
    written = conversion.write("tf1", "out_dir", weights)
"""

from __future__ import annotations

import modeling
from bert_realformer.checkpoints import formats
from bert_realformer.checkpoints.formats import ReadOptions, Weights, WriteOptions
from bert_realformer.checkpoints.pretrained import format_of
from bert_realformer.checkpoints.tf1 import assign_named_values
from bert_realformer.errors import InputError

__all__ = ["Weights", "describe", "model_for", "read", "unserved_head", "write"]

# Task heads a SavedModel does not serve (`model_for` would drop them): (their names' prefix, the
# head, the script that predicts with it)
AUTO = "auto"  # `read`'s kind: the format of what the path holds
UNSERVED_HEADS = (("cls/squad/", "a SQuAD span head", "run_squad.py --do_predict"),
                  ("cls/ner/", "a token-classification head", "run_ner.py --do_predict"),
                  ("cls/multiple_choice/", "a multiple-choice head", "run_multiple_choice.py --do_predict"))


def read(kind: str, path: str, config_file: str | None = None, vocab_file: str | None = None,
         force: bool = False, target: str | None = None, scratch_dir: str | None = None) -> Weights:
    """The weights at `path` in format `kind` (`formats.get`; `auto`: the format of what `path`
    holds, `pretrained.format_of`). `config_file` and `vocab_file`
    default to the files beside `path`; `target` is where they go (Hugging Face weights missing
    from the config can go to tf1 and hf with `force`, not into a model that would keep random
    weights); `scratch_dir` (`ReadOptions`) holds what a format makes while reading."""
    if not formats.checkpoint_exists(path):
        raise InputError(f"input={path}: no such file or directory", options=("input",))
    if kind == AUTO:
        kind, path = format_of(path)
    return formats.get(kind).read(path, ReadOptions(config_file, vocab_file, force, target, scratch_dir))


def describe(weights: Weights) -> str:
    """'N weights (L layers, hidden H, <variant>)': what was converted, in one phrase."""
    config = weights.config
    return (f"{len(weights.values)} weights ({config.num_hidden_layers} layers, hidden {config.hidden_size}, "
            f"{config.layer_norm_type}-LN, residual_attention={config.residual_attention})")


def unserved_head(weights: Weights) -> tuple[str, str] | None:
    """(the head, the script that predicts with it) of a task head in `weights` that no
    SavedModel serves (`UNSERVED_HEADS`), else None."""
    for prefix, head, script in UNSERVED_HEADS:
        if any(name.startswith(prefix) for name in weights.values):
            return head, script
    return None


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
    assign_named_values(model, values, "input", options=("input",))
    return model


def write(kind: str, directory: str, weights: Weights, do_lower_case: bool = True, max_seq_length: int = 128,
          force: bool = False) -> list[str]:
    """Writes `weights` into `directory` in format `kind` (KerasHub's preprocessor gets
    `max_seq_length`; Hugging Face's and KerasHub's tokenizers `do_lower_case`); returns what
    was written, for the user. What the target has no place for is refused unless `force`
    (then noted in `weights.notes`)."""
    return formats.get(kind).write(directory, weights, WriteOptions(do_lower_case, max_seq_length, force))
