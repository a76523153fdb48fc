"""`Family`: what one member of the BERT family is called in Hugging Face's names.

BERT and RoBERTa share the encoder's names below their prefix (`bert.` / `roberta.`) and differ
in the heads, the class names and a few config.json fields; DistilBERT and ALBERT name their
layers too; a family lists all of those, so reading and writing a Hugging Face directory
(`huggingface`) is one piece of code for every family. Each family's names are one module:
BERT's in `huggingface`, RoBERTa's in `roberta`, DistilBERT's in `distilbert`, ALBERT's in
`albert`.

A row is (Hugging Face name, TF1 name, transpose): Hugging Face keeps PyTorch's [out, in] dense
weights, the original [in, out].
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping

Row = tuple[str, str, bool]

# Inside encoder.layer.N / bert/encoder/layer_N: the same in every BERT-shaped family.
LAYER_PARTS: tuple[Row, ...] = (
    ("attention.self.query.weight", "attention/self/query/kernel", True),
    ("attention.self.query.bias", "attention/self/query/bias", False),
    ("attention.self.key.weight", "attention/self/key/kernel", True),
    ("attention.self.key.bias", "attention/self/key/bias", False),
    ("attention.self.value.weight", "attention/self/value/kernel", True),
    ("attention.self.value.bias", "attention/self/value/bias", False),
    ("attention.output.dense.weight", "attention/output/dense/kernel", True),
    ("attention.output.dense.bias", "attention/output/dense/bias", False),
    ("attention.output.LayerNorm.weight", "attention/output/LayerNorm/gamma", False),
    ("attention.output.LayerNorm.bias", "attention/output/LayerNorm/beta", False),
    ("intermediate.dense.weight", "intermediate/dense/kernel", True),
    ("intermediate.dense.bias", "intermediate/dense/bias", False),
    ("output.dense.weight", "output/dense/kernel", True),
    ("output.dense.bias", "output/dense/bias", False),
    ("output.LayerNorm.weight", "output/LayerNorm/gamma", False),
    ("output.LayerNorm.bias", "output/LayerNorm/beta", False),
)
EMBEDDINGS: tuple[Row, ...] = (
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
)
POOLER: tuple[Row, ...] = (
    ("pooler.dense.weight", "bert/pooler/dense/kernel", True),
    ("pooler.dense.bias", "bert/pooler/dense/bias", False),
)
POOLER_WEIGHTS = tuple(tf1 for _, tf1, _ in POOLER)
WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"

# Our activation names -> Hugging Face's (its "gelu" is the exact one, the original's the tanh form).
OURS_TO_HF_ACTIVATION = types.MappingProxyType({
    "gelu_exact": "gelu", "gelu": "gelu_new", "gelu_new": "gelu_new", "relu": "relu", "tanh": "tanh",
    "swish": "silu", "linear": "linear"})


def bert_config_fields(config) -> dict:
    """The sizes of a BERT-shaped config.json (BERT's and RoBERTa's names)."""
    return {"vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
            "num_hidden_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads,
            "intermediate_size": config.intermediate_size,
            "hidden_act": OURS_TO_HF_ACTIVATION[config.hidden_act.lower()],
            "hidden_dropout_prob": config.hidden_dropout_prob,
            "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
            "max_position_embeddings": config.max_position_embeddings,
            "type_vocab_size": config.type_vocab_size, "initializer_range": config.initializer_range,
            "layer_norm_eps": config.layer_norm_eps, "position_embedding_type": "absolute"}


@dataclasses.dataclass(frozen=True)
class Family:
    """One family's Hugging Face names.

    `prefix`: the encoder's inside a task class (`bert.`); `encoder_class`: the encoder alone,
    unprefixed (`BertModel`); `masked_lm`: the MLM head's rows (full names) and `masked_lm_class`
    its class; `next_sentence` and `pretraining_class`: the NSP head's and the class with both
    (None where the family has none); `tied`: {Hugging Face name: TF1 name it copies} for the
    decoder weights the MLM class ties; `task_heads`: {class: rows} of the fine-tuning heads;
    `pooler_in_head`: the classes whose head rows hold the pooler's weights under their own names;
    `without_pooler`: the classes transformers builds with no pooler at all;
    `config_fields(config)`: the config.json fields of the family (sizes, special ids);
    `embeddings`, `layer_scope` (`encoder.layer.{}`: layer N's names start `encoder.layer.N.`),
    `tf1_layer_scope` (its TF1 names': `bert/encoder/layer_N/`; ALBERT's name a group of shared
    weights), `layer_parts`, `pooler`: the encoder's rows (BERT's unless a family names them
    otherwise);
    `wordpiece`: its tokenizer is BERT's (a vocab.txt may be made from its tokenizer.json).
    """
    name: str
    model_type: str
    prefix: str
    encoder_class: str
    masked_lm: tuple[Row, ...]
    masked_lm_class: str
    tied: Mapping[str, str]
    task_heads: Mapping[str, tuple[Row, ...]]
    config_fields: Callable
    next_sentence: tuple[Row, ...] = ()
    pretraining_class: str | None = None
    pooler_in_head: frozenset[str] = frozenset()
    without_pooler: frozenset[str] = frozenset()
    embeddings: tuple[Row, ...] = EMBEDDINGS
    layer_scope: str = "encoder.layer.{}"
    tf1_layer_scope: str = "bert/encoder/layer_{}"
    layer_parts: tuple[Row, ...] = LAYER_PARTS
    pooler: tuple[Row, ...] = POOLER
    wordpiece: bool = True
