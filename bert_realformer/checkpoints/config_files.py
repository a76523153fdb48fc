"""`bert_config.json` files on any filesystem: read (errors name the file) and written
atomically. The parsing itself is `modeling.BertConfig.from_json_string` (modeling does no I/O).

    config = read_config("uncased_L-12_H-768_A-12/bert_config.json")
    write_config(config, "out/bert_config.json")
"""

from __future__ import annotations

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
    return BertConfig.from_json_string(text, source=str(path))


def write_config(config: BertConfig, path: str) -> None:
    """Writes `config` to `path` atomically (temporary name, then rename)."""
    storage.write_atomic(str(path), config.to_json_string())
