"""Low-rank adaptation of the encoder (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large
Language Models"), on Keras's own `Dense.enable_lora`.

    model = modeling.BertClassifier(config, num_labels=2)
    modeling.enable_lora(model, rank=8)          # query and value of every layer, as the paper
    model.compile(...); model.fit(...)           # only the LoRA factors and the head train

Each chosen dense layer of every encoder layer computes x (W + alpha / r A B): W [in, out]
frozen, A [in, r] (He uniform) and B [r, out] (zeros, so training starts from the pretrained
function) trained. Every other encoder weight (embeddings, LayerNorms, biases, the pooler) is
frozen; the task's heads train in full.

What leaves the model is plain: its TF1 names read an adapted kernel merged
(`layers.MergedLoraKernel`), so TF1 checkpoints, conversions and `.keras` files (Keras merges
too) hold W + alpha / r A B, and `without_lora` gives the same model with no LoRA left in it (for
a SavedModel). `weight_variables` keeps W, A and B apart: what a training state must hold to go
on exactly where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import keras
import numpy as np

from modeling.layers import MergedLoraKernel
from modeling.models import tf1_variable_map

# The dense layers LoRA can adapt in each encoder layer, by the names of their TF1 weights.
TARGETS: MappingProxyType[str, Callable] = MappingProxyType({
    "query": lambda block: block.attention.query,
    "key": lambda block: block.attention.key,
    "value": lambda block: block.attention.value,
    "attention_output": lambda block: block.attention_output,
    "intermediate": lambda block: block.intermediate,
    "output": lambda block: block.output_dense,
})
DEFAULT_TARGETS = ("query", "value")
BASE, FACTOR_A, FACTOR_B = "lora_base", "lora_a", "lora_b"
SCALE = "lora_scale"  # alpha / r, where a training state keeps it


def encoder_of(model: keras.Model) -> keras.Model:
    """The `BertModel` of `model` (itself, or the `.bert` of a model with heads)."""
    return getattr(model, "bert", model)


def enable_lora(model: keras.Model, rank: int, alpha: float | None = None,
                targets: Sequence[str] = DEFAULT_TARGETS) -> list[keras.layers.Dense]:
    """Adapts the `targets` dense layers of every encoder layer of `model` (built here if it is
    not) with rank-`rank` factors scaled by `alpha / rank` (`alpha` None: `rank`, a scale of 1),
    and freezes every other weight of the encoder. Returns the adapted layers."""
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown or not targets:
        raise ValueError(f"LoRA targets {list(targets)}: expected some of {', '.join(TARGETS)}")
    if rank < 1:
        raise ValueError(f"a LoRA rank is a positive integer, not {rank}")
    if not model.built:
        model.build()
    encoder = encoder_of(model)
    adapted = [TARGETS[target](block) for block in encoder.encoder.blocks for target in targets]
    for layer in adapted:
        layer.enable_lora(rank, lora_alpha=alpha)
    factors = {id(variable) for layer in adapted for variable in (layer.lora_kernel_a, layer.lora_kernel_b)}
    for variable in encoder.weights:
        variable.trainable = id(variable) in factors
    return adapted


def adapted_layers(model: keras.Model) -> list[keras.layers.Dense]:
    """The LoRA-adapted dense layers of `model`'s encoder."""
    return [layer for layer in encoder_of(model)._flatten_layers()
            if isinstance(layer, keras.layers.Dense) and layer.lora_enabled]


def weight_variables(model: keras.Model) -> dict[str, keras.Variable]:
    """{name: variable} of every weight of `model`: its TF1 names (`tf1_variable_map`), a
    LoRA-adapted kernel as its three parts, `NAME/lora_base` (W), `NAME/lora_a`, `NAME/lora_b`."""
    named = {}
    for name, variable in tf1_variable_map(model).items():
        if isinstance(variable, MergedLoraKernel):
            layer = variable.layer
            named.update({f"{name}/{BASE}": layer._kernel, f"{name}/{FACTOR_A}": layer.lora_kernel_a,
                          f"{name}/{FACTOR_B}": layer.lora_kernel_b})
        else:
            named[name] = variable
    return named


def fold_factors(values: Mapping[str, np.ndarray], scale: float) -> dict[str, np.ndarray]:
    """{name: array} as `weight_variables` names them, each LoRA-adapted kernel's three parts
    folded into its TF1 name as the merged kernel W + `scale` A B (what the model computes)."""
    folded = dict(values)
    for key in [key for key in values if key.endswith(f"/{BASE}")]:
        name = key[:-len(BASE) - 1]
        base, a, b = folded.pop(key), folded.pop(f"{name}/{FACTOR_A}"), folded.pop(f"{name}/{FACTOR_B}")
        folded[name] = (base.astype(np.float32) + scale * (a @ b)).astype(base.dtype)
    return folded


def without_lora(model: keras.Model) -> keras.Model:
    """`model` itself when nothing in it is LoRA-adapted, else a new model of its class and
    config whose kernels are the merged ones (the same outputs, plain dense layers)."""
    adapted = adapted_layers(model)
    if not adapted:
        return model
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(adapted[0].dtype_policy)  # (a mixed-precision model's copy computes as it does)
    try:
        plain = type(model).from_config(model.get_config())
        plain.build()
    finally:
        keras.config.set_dtype_policy(previous)
    values = {name: keras.ops.convert_to_numpy(variable.value) for name, variable in tf1_variable_map(model).items()}
    for name, variable in tf1_variable_map(plain).items():
        variable.assign(values[name])
    return plain


def count_weights(variables: Sequence[keras.Variable]) -> int:
    """The number of scalars in `variables`."""
    return sum(math.prod(variable.shape) for variable in variables)
