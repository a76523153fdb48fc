"""Hugging Face BERT weights (safetensors + config.json) <-> the original TF1 names.

Hugging Face keeps PyTorch's [out, in] dense weights, so kernels are transposed; names differ
(`encoder.layer.3.attention.self.query.weight` is `bert/encoder/layer_3/attention/self/query/
kernel`, transposed); `BertForPreTraining` prefixes the encoder with `bert.` and names its heads
`cls.predictions.*` (the decoder weight is the tied word embeddings) and `cls.seq_relationship.*`.
Hugging Face's `"gelu"` is the exact erf GELU (our `"gelu_exact"`); its `"gelu_new"` is the
original BERT's tanh GELU (our `"gelu"`). Pure NumPy: no TensorFlow, no PyTorch.
"""

import json
import os
import re

import numpy as np

from bert_realformer import storage
from bert_realformer.text_files import read_text
from modeling.config import BertConfig, ConfigError

_HF_ACT_TO_OURS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                   "relu": "relu", "tanh": "tanh", "silu": "swish", "swish": "swish", "linear": "linear"}
_OURS_TO_HF_ACT = {"gelu_exact": "gelu", "gelu": "gelu_new", "gelu_new": "gelu_new", "relu": "relu",
                   "tanh": "tanh", "swish": "silu", "linear": "linear"}
_LAYER_PARTS = [  # (Hugging Face name inside encoder.layer.N, TF1 name inside layer_N, transpose)
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
]
_FIXED = [
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("pooler.dense.weight", "bert/pooler/dense/kernel", True),
    ("pooler.dense.bias", "bert/pooler/dense/bias", False),
]
_HEADS = [  # full Hugging Face names (BertForPreTraining)
    ("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
    ("cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
    ("cls.predictions.bias", "cls/predictions/output_bias", False),
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False),
]


def _name_map(num_layers, prefix):
    """[(Hugging Face name, TF1 name, transpose)] for an encoder (+ heads when prefix='bert.')."""
    rows = [(prefix + hf, tf1, t) for hf, tf1, t in _FIXED]
    for i in range(num_layers):
        rows += [(f"{prefix}encoder.layer.{i}.{hf}", f"bert/encoder/layer_{i}/{tf1}", t)
                 for hf, tf1, t in _LAYER_PARTS]
    return rows + (_HEADS if prefix else [])


def _normalise(name):
    """Old checkpoints say LayerNorm.gamma/beta for weight/bias."""
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def hf_to_tf1(tensors, num_layers):
    """{Hugging Face name: array} -> ({TF1 name: array}, [Hugging Face names not used])."""
    tensors = {_normalise(k): v for k, v in tensors.items()}
    prefix = "bert." if any(k.startswith("bert.") for k in tensors) else ""
    out, used = {}, set()
    for hf, tf1, transpose in _name_map(num_layers, prefix):
        if hf in tensors:
            out[tf1] = np.ascontiguousarray(tensors[hf].T if transpose else tensors[hf])
            used.add(hf)
    tied = {f"{prefix}cls.predictions.decoder.weight", f"{prefix}cls.predictions.decoder.bias",
            "cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
            f"{prefix}embeddings.position_ids", "embeddings.position_ids"}
    unused = sorted(k for k in tensors if k not in used and k not in tied)
    return out, unused


def tf1_to_hf(values, num_layers):
    """{TF1 name: array} -> ({Hugging Face name: array}, architecture, [TF1 names left out]):
    `BertForPreTraining` names when the MLM/NSP heads are there, else `BertModel` names. Left out:
    what those classes have no place for (fine-tuning heads, Pre-LN's extra LayerNorms)."""
    heads = "cls/predictions/output_bias" in values
    out, used = {}, set()
    for hf, tf1, transpose in _name_map(num_layers, "bert." if heads else ""):
        if tf1 in values:
            out[hf] = np.ascontiguousarray(values[tf1].T if transpose else values[tf1])
            used.add(tf1)
    if heads:
        out["cls.predictions.decoder.weight"] = out["bert.embeddings.word_embeddings.weight"]
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"]
    left_out = sorted(name for name in values if name not in used)
    return out, ("BertForPreTraining" if heads else "BertModel"), left_out


def config_from_hf(hf_config, source="config.json"):
    """A Hugging Face BERT config.json object -> BertConfig (original post-LN BERT)."""
    if hf_config.get("model_type", "bert") != "bert":
        raise ConfigError(f"{source}: model_type {hf_config.get('model_type')!r} is not bert")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{source}: position_embedding_type {hf_config['position_embedding_type']!r} "
                          "is not supported (only absolute)")
    eps = hf_config.get("layer_norm_eps", 1e-12)
    if abs(eps - 1e-12) > 1e-15:
        raise ConfigError(f"{source}: layer_norm_eps {eps} differs from BERT's 1e-12")
    act = hf_config.get("hidden_act", "gelu")
    if act not in _HF_ACT_TO_OURS:
        raise ConfigError(f"{source}: hidden_act {act!r} has no equivalent here")
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
            "type_vocab_size", "initializer_range")
    values = {k: hf_config[k] for k in keys if k in hf_config}
    return BertConfig.from_dict({**values, "hidden_act": _HF_ACT_TO_OURS[act]}, source=source)


def config_to_hf(config, architecture, force=False):
    """BertConfig -> Hugging Face config.json object. Pre-LN and RealFormer cannot be expressed
    by Hugging Face's BertModel: an error unless `force` (then the variant is dropped)."""
    if (config.layer_norm_type != "post" or config.residual_attention != "none") and not force:
        raise ConfigError(f"a {config.layer_norm_type}-LN model with residual_attention="
                          f"{config.residual_attention!r} cannot be expressed by Hugging Face's BertModel "
                          "(it would silently become plain BERT); pass --force to export anyway")
    return {"architectures": [architecture], "model_type": "bert",
            "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
            "num_hidden_layers": config.num_hidden_layers,
            "num_attention_heads": config.num_attention_heads,
            "intermediate_size": config.intermediate_size,
            "hidden_act": _OURS_TO_HF_ACT[config.hidden_act.lower()],
            "hidden_dropout_prob": config.hidden_dropout_prob,
            "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
            "max_position_embeddings": config.max_position_embeddings,
            "type_vocab_size": config.type_vocab_size, "initializer_range": config.initializer_range,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute"}


def read_hf_dir(path):
    """(BertConfig, {TF1 name: array}, vocab path or None, unused Hugging Face names)."""
    from safetensors.numpy import load
    config_path = os.path.join(path, "config.json")
    weights_path = os.path.join(path, "model.safetensors")
    for required in (config_path, weights_path):
        if not storage.isfile(required):
            raise ConfigError(f"{required}: missing (a Hugging Face model directory holds config.json "
                              "and model.safetensors)")
    try:
        hf_config = json.loads(read_text(config_path))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{config_path}: invalid JSON at line {error.lineno} column {error.colno}: "
                          f"{error.msg}") from None
    config = config_from_hf(hf_config, source=config_path)
    values, unused = hf_to_tf1(load(storage.read_bytes(weights_path)), config.num_hidden_layers)
    vocab = os.path.join(path, "vocab.txt")
    return config, values, (vocab if storage.isfile(vocab) else None), unused


def write_hf_dir(path, config, values, vocab_file=None, force=False):
    """Writes config.json, model.safetensors (and vocab.txt) into `path`. Returns (the
    architecture, [TF1 names left out]). Weights with no Hugging Face place are an error unless
    `force`."""
    from safetensors.numpy import save
    tensors, architecture, left_out = tf1_to_hf(values, config.num_hidden_layers)
    hf_config = config_to_hf(config, architecture, force)
    if left_out and not force:
        raise ConfigError(f"{len(left_out)} weights have no place in Hugging Face's {architecture} and would be "
                          f"dropped: {name_list(left_out)}; pass --force to write without them")
    # Tied tensors must not share memory in a safetensors file; transformers 4.x needs the
    # "format" metadata to load it.
    weights = save({k: np.array(v, copy=True) for k, v in tensors.items()}, metadata={"format": "pt"})
    storage.write_atomic(os.path.join(path, "model.safetensors"), weights)
    storage.write_atomic(os.path.join(path, "config.json"), json.dumps(hf_config, indent=2))
    if vocab_file:
        storage.write_atomic(os.path.join(path, "vocab.txt"), storage.read_bytes(vocab_file))
    return architecture, left_out


def name_list(names, limit=6):
    """'a, b, c and 4 more' for messages."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
