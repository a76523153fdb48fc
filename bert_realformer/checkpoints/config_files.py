"""`bert_config.json` files on any filesystem: read (errors name the file) and written
atomically. The parsing itself is `modeling.BertConfig.from_json_string` (modeling does no I/O).
A Hugging Face model's `config.json` and a KerasHub preset's are read too, as their weights are
(`huggingface.config_from_hf`, `kerashub.config_from_kerashub`): `--bert_config_file` may name
the config of whatever `--init_checkpoint` names.

    config = read_config("uncased_L-12_H-768_A-12/bert_config.json")
    write_config(config, "out/bert_config.json")
"""

from __future__ import annotations

import json
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
        from bert_realformer.checkpoints.huggingface import config_from_hf
        return config_from_hf(parsed, source=source)
    if parsed.get("class_name") == "BertBackbone" and isinstance(parsed.get("config"), dict):
        from bert_realformer.checkpoints.kerashub import config_from_kerashub
        return config_from_kerashub(parsed["config"], source)
    return None


def write_config(config: BertConfig, path: str) -> None:
    """Writes `config` to `path` atomically (temporary name, then rename)."""
    storage.write_atomic(str(path), config.to_json_string())
