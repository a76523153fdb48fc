"""`bert_config.json` files on any filesystem: read (errors name the file) and written
atomically. The parsing itself is `modeling.BertConfig.from_json_string`.
A Hugging Face model's `config.json` and a KerasHub preset's are read too (`config_from_hf`,
`config_from_kerashub`: what their formats read their configs with), so `--bert_config_file` may
name the config of whatever `--init_checkpoint` names.

    config = read_config("uncased_L-12_H-768_A-12/bert_config.json")
    write_config(config, "out/bert_config.json")
"""

from __future__ import annotations

import json
import types
from typing import TYPE_CHECKING

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.storage import UnreadableFileError
from bert_realformer.text_files import read_text

if TYPE_CHECKING:
    from modeling.config import BertConfig


def read_config(path: str) -> BertConfig:
    """The config in `path`, every size checked; a `ConfigError` names the file."""
    from modeling.config import BertConfig, ConfigError  # (here: importing modeling imports Keras)
    try:
        text = read_text(str(path))
    except UnreadableFileError as error:
        raise ConfigError(f"{path}: cannot read config ({error.reason})") from None
    except InputError as error:  # not UTF-8 (the message names the line)
        raise ConfigError(str(error)) from None
    config = _foreign_config(text, str(path))
    if config is None:
        return BertConfig.from_json_string(text, source=str(path))
    config.check_buildable()
    return config


def _foreign_config(text: str, source: str) -> BertConfig | None:
    """The config of a Hugging Face config.json (it names its `model_type`) or a KerasHub
    preset's (a serialised `BertBackbone`); None for any other text (a `bert_config.json`)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None  # (`from_json_string` says where)
    if not isinstance(parsed, dict):
        return None
    if "model_type" in parsed:
        return config_from_hf(parsed, source=source)
    if parsed.get("class_name") == "BertBackbone" and isinstance(parsed.get("config"), dict):
        return config_from_kerashub(parsed["config"], source)
    return None


# Hugging Face's activation names -> ours (its "gelu" is the exact one, the original's the tanh form).
_HF_ACT_TO_OURS = types.MappingProxyType({
    "gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh",
    "silu": "swish", "swish": "swish", "linear": "linear"})


def config_from_hf(hf_config: dict, source: str = "config.json") -> BertConfig:
    """A Hugging Face BERT, RoBERTa, DistilBERT or ALBERT config.json object -> BertConfig
    (post-LN; RoBERTa's positions start past its padding index: `position_offset` =
    `pad_token_id` + 1; DistilBERT has no token types and a ReLU where BERT's pooler has tanh;
    ALBERT keeps its `embedding_size` and `num_hidden_groups`)."""
    from bert_realformer.checkpoints.distilbert import CONFIG_NAMES as DISTILBERT_NAMES
    from modeling.config import BertConfig, ConfigError
    model_type = hf_config.get("model_type", "bert")
    if model_type not in ("bert", "roberta", "distilbert", "albert"):
        raise ConfigError(f"{source}: model_type {model_type!r} is not bert, roberta, distilbert or albert")
    if model_type == "distilbert":
        hf_config = {**{ours: hf_config[theirs] for theirs, ours in DISTILBERT_NAMES.items() if theirs in hf_config},
                     "type_vocab_size": 0, "pooler_activation": "relu"}
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{source}: position_embedding_type {hf_config['position_embedding_type']!r} "
                          "is not supported (only absolute)")
    act = hf_config.get("hidden_act", "gelu")
    if act not in _HF_ACT_TO_OURS:
        raise ConfigError(f"{source}: hidden_act {act!r} has no equivalent here")
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
            "type_vocab_size", "initializer_range", "layer_norm_eps", "pooler_activation", "embedding_size",
            "num_hidden_groups", "inner_group_num")
    values = {k: hf_config[k] for k in keys if k in hf_config}
    try:
        offset = hf_position_offset(hf_config)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None
    if offset:
        values["position_offset"] = offset
    return BertConfig.from_dict({**values, "hidden_act": _HF_ACT_TO_OURS[act]}, source=source)


def hf_position_offset(hf_config: dict) -> int:
    """The first position a Hugging Face model's sequences use: RoBERTa's start past its padding
    index (`pad_token_id` + 1), the others' at 0. A `ValueError` for a padding index that is no
    non-negative integer."""
    if hf_config.get("model_type") != "roberta":
        return 0
    pad_token_id = hf_config.get("pad_token_id", 1)
    if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) or pad_token_id < 0:
        raise ValueError(f"pad_token_id must be a non-negative integer, got {pad_token_id!r}")
    return pad_token_id + 1


def declared_positions(path: str) -> tuple[int, int] | None:
    """(max_position_embeddings, position_offset) that the config file at `path` declares (a
    `bert_config.json`, a Hugging Face config.json or a KerasHub preset's), read as JSON without
    building the config, so without TensorFlow; None where the file does not say them plainly
    (`read_config` then says what is wrong with it)."""
    parsed = _json_object(path)
    if parsed is None:
        return None
    try:
        if parsed.get("class_name") == "BertBackbone" and isinstance(parsed.get("config"), dict):
            positions, offset = parsed["config"].get("max_sequence_length", 512), 0
        elif "model_type" in parsed:
            positions, offset = parsed.get("max_position_embeddings", 512), hf_position_offset(parsed)
        else:
            positions, offset = parsed.get("max_position_embeddings", 512), parsed.get("position_offset", 0)
    except ValueError:
        return None
    plain = all(isinstance(value, int) and not isinstance(value, bool) for value in (positions, offset))
    return (positions, offset) if plain else None


def declared_embedding_shapes(path: str) -> dict[str, tuple[int, ...]]:
    """{TF1 name: shape} of the embedding tables a `bert_config.json` at `path` declares, read as
    JSON without TensorFlow; empty for another kind of config or sizes not said plainly."""
    parsed = _json_object(path)
    if parsed is None or "model_type" in parsed or "class_name" in parsed:
        return {}
    width = parsed.get("embedding_size") or parsed.get("hidden_size")
    rows = {"word_embeddings": parsed.get("vocab_size"),
            "position_embeddings": parsed.get("max_position_embeddings", 512),
            "token_type_embeddings": parsed.get("type_vocab_size", 16)}
    if not all(isinstance(size, int) and not isinstance(size, bool) for size in (width, *rows.values())):
        return {}
    return {f"bert/embeddings/{name}": (size, width) for name, size in rows.items() if size}


def _json_object(path: str) -> dict | None:
    """The JSON object in the file at `path`, or None (unreadable, not JSON, not an object)."""
    try:
        parsed = json.loads(read_text(str(path)))
    except (InputError, ValueError):
        return None
    return parsed if isinstance(parsed, dict) else None


def check_sequence_length(max_seq_length: int, max_position_embeddings: int, position_offset: int,
                          config_file: str) -> None:
    """An `InputError` naming `max_seq_length` when it exceeds the positions the config at
    `config_file` covers (its `max_position_embeddings` past its `position_offset`)."""
    if max_seq_length > max_position_embeddings - position_offset:
        offset = f" less its position_offset {position_offset}" if position_offset else ""
        raise InputError(f"max_seq_length={max_seq_length} exceeds max_position_embeddings "
                         f"{max_position_embeddings}{offset} of {config_file}", options=("max_seq_length",))


def check_shapes_agree(prefix: str, stored: dict, expected: dict, option: str = "init_checkpoint") -> None:
    """An `InputError` naming the first weight of `expected` {TF1 name: shape} (what the config
    gives) that `stored` (what the checkpoint at `prefix` holds) has in another shape."""
    for name, shape in expected.items():
        if name in stored and tuple(stored[name]) != tuple(shape):
            raise InputError(f"{option}={prefix}: {name} has shape {list(stored[name])} but bert_config_file gives "
                             f"it {list(shape)}: another model's checkpoint, or another model's config?",
                             options=(option, "bert_config_file"))


def config_from_kerashub(backbone_config: dict, source: str) -> BertConfig:
    """A `BertBackbone`'s config (its `get_config()`, the `config` of a preset's config.json) ->
    BertConfig: post-LN BERT with the original's tanh GELU."""
    from modeling.config import BertConfig, ConfigError
    try:
        return BertConfig(vocab_size=backbone_config["vocabulary_size"], hidden_size=backbone_config["hidden_dim"],
                          num_hidden_layers=backbone_config["num_layers"],
                          num_attention_heads=backbone_config["num_heads"],
                          intermediate_size=backbone_config["intermediate_dim"],
                          hidden_dropout_prob=backbone_config.get("dropout", 0.1),
                          attention_probs_dropout_prob=backbone_config.get("dropout", 0.1),
                          max_position_embeddings=backbone_config.get("max_sequence_length", 512),
                          type_vocab_size=backbone_config.get("num_segments", 2), source=source)
    except (KeyError, TypeError) as error:
        raise ConfigError(f"{source}: not a KerasHub BertBackbone config (no {error})") from None



def write_config(config: BertConfig, path: str) -> None:
    """Writes `config` to `path` atomically (temporary name, then rename)."""
    storage.write_atomic(str(path), config.to_json_string())
