"""`BertConfig`: the original `bert_config.json` format plus our variant keys.

The original keys keep their names and defaults. Two keys of ours select the Transformer
variant; absent, they give the original post-LN BERT:

* `layer_norm_type`: `"post"` (original BERT) or `"pre"` (Pre-LN, with a final LayerNorm).
* `residual_attention`: `"none"` (BERT), `"sum"` or `"mean"` (RealFormer). A config written by the
  official RealFormer code carries `use_running_mean` instead; it is read as RealFormer
  (`"mean"` when true, `"sum"` when false) and written back alongside our key.

Two more keys say what another member of the BERT family changes; absent (and then not
written), they are the original's:

* `position_offset`: the first position embedding a sequence uses (0; RoBERTa's is 2, its
  padding index plus one), so `max_seq_length` is at most `max_position_embeddings` less it.
* `layer_norm_eps`: every LayerNorm's epsilon (the original's 1e-12; RoBERTa's 1e-5).
* `pooler_activation`: the pooler's (`"tanh"`; DistilBERT's classifier puts a ReLU there).
* `embedding_size` (ALBERT's): the width of the embedding tables, projected to `hidden_size` by
  `bert/encoder/embedding_hidden_mapping_in` before the first layer (absent: `hidden_size`, no
  projection); the masked-LM head's transform maps back to it.
* `num_hidden_groups` (ALBERT's): the number of distinct sets of layer weights; layer i runs the
  set `i * num_hidden_groups // num_hidden_layers` (1: one set shared by every layer). Present,
  the layers take ALBERT's TF1 names (`bert/encoder/transformer/group_G/inner_group_0/...`);
  ALBERT's `inner_group_num` must then be 1 (more layers inside a group are not supported).

And `type_vocab_size` may be 0: no token-type embeddings (DistilBERT's), the segment ids ignored;
or 1 (RoBERTa's): its one row added at every position, the segment ids ignored too (a pair's
second text is not a second type there).

Keys this class does not know (released configs carry `directionality`, `pooler_fc_size`, ...)
are kept in `extra_keys` and written back unchanged.

This module parses and writes JSON text only; reading and writing `bert_config.json` files
(any filesystem, atomically) is `bert_realformer.checkpoints.config_files`.
"""

import copy
import dataclasses
import json
import types
from typing import Any

from bert_realformer.errors import InputError
from modeling.activations import ACTIVATIONS
from modeling.variants import Variant

_POSITIVE_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "max_position_embeddings")
POOLER_ACTIVATIONS = ("tanh", "relu")
_PROBABILITIES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


class ConfigError(InputError):
    """A config value is missing, of the wrong type, or out of range (one-line message)."""


@dataclasses.dataclass(eq=False)
class BertConfig:
    """Configuration of a `BertModel`: the original keys with the original's defaults, in its
    order, then ours (`layer_norm_type`, `residual_attention`: `variant`; `position_offset`,
    `layer_norm_eps`, `pooler_activation`, `embedding_size`, `num_hidden_groups`: the family's,
    written only when they differ from BERT's). `extra_keys`: keys
    this class does not know, kept; `source`: what the config came from (for messages)."""
    vocab_size: int | None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    layer_norm_type: str = "post"
    residual_attention: str = "none"
    position_offset: int = 0
    layer_norm_eps: float = 1e-12
    pooler_activation: str = "tanh"
    embedding_size: int | None = None
    num_hidden_groups: int | None = None
    extra_keys: dict[str, Any] = dataclasses.field(default_factory=dict)
    source: str = "BertConfig"

    def __post_init__(self) -> None:
        self.extra_keys = dict(self.extra_keys or {})
        self.validate(self.source)

    @property
    def variant(self) -> Variant:
        """The Transformer variant this config selects (`modeling.variants`)."""
        return Variant(self.layer_norm_type, self.residual_attention)

    @property
    def size_per_head(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self) -> int:
        """The width E of the embedding tables (`embedding_size`, else `hidden_size`)."""
        return self.embedding_size or self.hidden_size

    @property
    def num_layer_groups(self) -> int:
        """How many distinct sets of layer weights the encoder holds (ALBERT's groups, else one
        per layer)."""
        return self.num_hidden_groups or self.num_hidden_layers

    def group_of_layer(self, layer_index: int) -> int:
        """The set of weights layer `layer_index` runs (ALBERT's `group_idx`)."""
        return layer_index * self.num_layer_groups // self.num_hidden_layers

    @property
    def max_sequence_length(self) -> int:
        """The longest sequence the position embeddings cover (past `position_offset`)."""
        return self.max_position_embeddings - self.position_offset

    def validate(self, source: str = "BertConfig") -> None:
        """Raises `ConfigError` naming `source` and the first offending key. Like the original,
        a config may lack `vocab_size` and have a `hidden_size` that the heads do not divide
        until a model is built from it (`check_buildable`)."""
        for key in _POSITIVE_INTS:
            value = getattr(self, key)
            if key == "vocab_size" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{source}: {key} must be a positive integer, got {value!r}")
        for key in _PROBABILITIES:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{source}: {key} must be a number in [0, 1), got {value!r}")
        if (isinstance(self.initializer_range, bool)
                or not isinstance(self.initializer_range, (int, float))
                or self.initializer_range <= 0):
            raise ConfigError(f"{source}: initializer_range must be a positive number, "
                              f"got {self.initializer_range!r}")
        if (isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int)
                or self.type_vocab_size < 0):
            raise ConfigError(f"{source}: type_vocab_size must be a non-negative integer (0: no token types), "
                              f"got {self.type_vocab_size!r}")
        if self.pooler_activation not in POOLER_ACTIVATIONS:
            raise ConfigError(f"{source}: unknown pooler_activation {self.pooler_activation!r}; expected one of "
                              f"{', '.join(POOLER_ACTIVATIONS)}")
        if (isinstance(self.position_offset, bool) or not isinstance(self.position_offset, int)
                or not 0 <= self.position_offset < self.max_position_embeddings):
            raise ConfigError(f"{source}: position_offset must be an integer in [0, max_position_embeddings="
                              f"{self.max_position_embeddings}), got {self.position_offset!r}")
        if (isinstance(self.layer_norm_eps, bool) or not isinstance(self.layer_norm_eps, (int, float))
                or not 0 < self.layer_norm_eps < 1):
            raise ConfigError(f"{source}: layer_norm_eps must be a number in (0, 1), got {self.layer_norm_eps!r}")
        for key in ("embedding_size", "num_hidden_groups"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigError(f"{source}: {key} must be a positive integer, got {value!r}")
        if self.num_hidden_groups is not None and self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(f"{source}: num_hidden_groups ({self.num_hidden_groups}) must be at most "
                              f"num_hidden_layers ({self.num_hidden_layers})")
        if self.extra_keys.get("inner_group_num", 1) != 1:
            raise ConfigError(f"{source}: inner_group_num {self.extra_keys['inner_group_num']!r} is not supported "
                              "(1: one layer per group, as every released ALBERT)")
        if not isinstance(self.hidden_act, str) or self.hidden_act.lower() not in ACTIVATIONS:
            raise ConfigError(f"{source}: unknown hidden_act {self.hidden_act!r}; "
                              f"expected one of {', '.join(sorted(ACTIVATIONS))}")
        problem = self.variant.problem()
        if problem:
            raise ConfigError(f"{source}: {problem}")

    def check_buildable(self, source: str | None = None) -> None:
        """What a model needs of the sizes, checked when one is built (as the original does):
        a `vocab_size`, and a `hidden_size` divisible by `num_attention_heads`."""
        source = source or self.source
        if self.vocab_size is None:
            raise ConfigError(f"{source}: vocab_size is required")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{source}: hidden_size ({self.hidden_size}) must be divisible by "
                              f"num_attention_heads ({self.num_attention_heads})")

    # ------------------------------------------------------------------ reading
    @classmethod
    def of(cls, config: "BertConfig | dict[str, Any]") -> "BertConfig":
        """`config` itself, or the config of its dict (as a layer's `get_config` holds it)."""
        return config if isinstance(config, cls) else cls.from_dict(config)

    @classmethod
    def from_dict(cls, json_object: dict[str, Any], source: str = "BertConfig") -> "BertConfig":
        """Builds a config from a parsed `bert_config.json` object."""
        if not isinstance(json_object, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(json_object).__name__}")
        values = dict(json_object)
        values.setdefault("vocab_size", None)  # the original's from_dict starts from vocab_size=None
        use_running_mean = values.pop("use_running_mean", None)
        if use_running_mean is not None:
            if not isinstance(use_running_mean, bool):
                raise ConfigError(f"{source}: use_running_mean must be true or false, "
                                  f"got {use_running_mean!r}")
            implied = "mean" if use_running_mean else "sum"
            declared = values.setdefault("residual_attention", implied)
            if declared != implied:
                raise ConfigError(f"{source}: use_running_mean={str(use_running_mean).lower()} "
                                  f"contradicts residual_attention={declared!r}")
        kwargs = {k: values.pop(k) for k in list(values) if k in _KEYS}
        return cls(**kwargs, extra_keys=values, source=source)

    @classmethod
    def from_json_string(cls, text: str, source: str = "BertConfig") -> "BertConfig":
        """Parses the text of a `bert_config.json` (`source` names it in errors) and checks
        every size at once, as a script's config file is checked."""
        try:
            json_object = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source}: invalid JSON at line {error.lineno} column "
                              f"{error.colno}: {error.msg}") from None
        config = cls.from_dict(json_object, source=source)
        config.check_buildable()
        return config

    @classmethod
    def from_json_file(cls, json_file: str) -> "BertConfig":
        """The original's reader, as its scripts call it first: the config in the file at
        `json_file` (a local path, or `gs://...` and the other filesystems `tf.io.gfile`
        reaches), as `from_json_string` of its text. The one file this package reads; the file
        module is imported here, so that the model itself loads without it."""
        from bert_realformer.text_files import read_text
        return cls.from_json_string(read_text(str(json_file)), source=str(json_file))

    # ------------------------------------------------------------------ writing
    def to_dict(self) -> dict[str, Any]:
        """The `bert_config.json` object: original keys, our keys (the family's only where they
        are not BERT's), then the kept unknown keys.

        RealFormer configs also carry `use_running_mean`, so the official code reads them too.
        """
        output = {key: getattr(self, key) for key in _KEYS
                  if key not in _WRITTEN_WHEN_SET or getattr(self, key) != _DEFAULTS[key]}
        if self.variant.is_realformer:
            output["use_running_mean"] = self.variant.running_mean
        for key, value in self.extra_keys.items():
            output.setdefault(key, copy.deepcopy(value))
        return output

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def replace(self, **changes: Any) -> "BertConfig":
        """A copy with some keys changed (validated), e.g. `config.replace(residual_attention="sum")`."""
        values = self.to_dict()
        values.pop("use_running_mean", None)
        values.update(changes)
        return BertConfig.from_dict(values)

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig({self.to_json_string().strip()})"


# The keys of bert_config.json this class reads and writes, in order (the original's, then ours).
_KEYS = tuple(field.name for field in dataclasses.fields(BertConfig) if field.name not in ("extra_keys", "source"))
# The family's keys: a BERT config leaves them out, so it stays the file the original writes.
_WRITTEN_WHEN_SET = ("position_offset", "layer_norm_eps", "pooler_activation", "embedding_size", "num_hidden_groups")
_DEFAULTS = types.MappingProxyType({field.name: field.default for field in dataclasses.fields(BertConfig)})
