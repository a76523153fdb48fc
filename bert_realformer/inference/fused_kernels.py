"""Float prediction with each Transformer block's intermediate product, its bias and its
activation (GELU) as one oneDNN kernel (`_FusedMatMul`), where TensorFlow's graph would write the
[tokens, intermediate_size] product out and run the GELU as about ten elementwise ops over it:
fewer passes over memory, most at large batches (`bench/fused_kernels.py` measures it). The same
formula: the outputs equal the plain graph's to about 1e-6.

The fused kernel is swapped in only while a prediction function is traced
(`FusedKernels.active()`): training never sees it (it has no gradient). It is tried once per
activation on a small input against the plain formula, and where this TensorFlow lacks it the
plain graph runs: with `TF_ENABLE_ONEDNN_OPTS=0` (or a build without oneDNN) TensorFlow's own
kernel fuses no GELU. XLA does not compile it and GPUs are not given it: the caller uses it on
CPUs without XLA only. On a CPU without AVX-512 oneDNN's GELU inside the product is slow, and
products of many rows leave it out and run it compiled by XLA (`activation_apart`). Measured and
left out: the other dense layers' products with their bias fused the same way (slower: the
reshapes around the kernel cost more than the bias add). oneDNN's LayerNorm kernel, slower than
the model's ops at batch 1, normalizes batches of many rows only (`layer_norm_kernel`).
"""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.inference import activation_apart
from modeling import activations
from modeling.encoder import TransformerBlock

logger = logging.getLogger(__name__)

# The blocks' activations that oneDNN applies inside the intermediate product, float or int8
# (`inference.int8`), by TensorFlow's names of the same formulas.
FUSED_ACTIVATIONS = types.MappingProxyType({activations.gelu: "GeluApproximate", activations.gelu_exact: "GeluExact",
                                           keras.ops.relu: "Relu", keras.ops.tanh: "Tanh"})
_TRIAL_ROWS = np.linspace(-2.0, 3.0, 24, dtype=np.float32).reshape(3, 8)


def apply_op(op_type: str, **attributes):
    """The first output of `op_type`, added to the graph by its definition (for oneDNN's ops,
    which TensorFlow gives no Python wrapper)."""
    from tensorflow.python.framework import op_def_library
    _, _, op, _ = op_def_library._apply_op_helper(op_type, **attributes)
    return op.outputs[0]


def on_rows(x, product):
    """x [..., K] -> `product` of its rows [M, K] (M the product of the leading sizes) -> [M, N]
    back in x's leading shape, [..., N]."""
    if len(x.shape) == 2:
        return product(x)
    out = product(tf.reshape(x, [-1, x.shape[-1]]))
    return tf.reshape(out, tf.concat([tf.shape(x)[:-1], [out.shape[-1]]], 0))


def fused_dense(x, kernel, bias, activation: str, apart: Callable | None = None):
    """x [..., K] float32 -> activation(x kernel + bias) [..., N] in one kernel; `activation` is
    one of `FUSED_ACTIVATIONS`' values (TensorFlow's names of the formulas). `apart`: the same
    activation compiled by XLA, which runs after the kernel on many rows (`activation_apart`)."""
    def product(rows, fused_ops):
        return apply_op("_FusedMatMul", name="FusedMatMul", a=rows, b=kernel, args=[bias], fused_ops=fused_ops,
                        transpose_a=False, transpose_b=False, epsilon=0.0, leakyrelu_alpha=0.0)  # (both unused)
    return on_rows(x, lambda rows: activation_apart.activated(
        rows, lambda: product(rows, ["BiasAdd", activation]), lambda: product(rows, ["BiasAdd"]), apart))


def dense_fuses(activation_fn, activation: str) -> bool:
    """Whether `fused_dense` runs here with `activation` and computes `activation_fn`."""
    kernel = tf.reshape(tf.linspace(-1.0, 1.0, 40), [8, 5])
    bias = tf.linspace(-0.5, 0.5, 5)
    rows = tf.constant(_TRIAL_ROWS)
    try:
        got = tf.function(lambda x: fused_dense(x, kernel, bias, activation), autograph=False)(rows)
    except (tf.errors.OpError, TypeError, ValueError, KeyError) as error:
        logger.info("the fused %s product does not run here, the plain graph is used: %s", activation,
                    str(error).strip().splitlines()[0])
        return False
    return bool(np.allclose(np.asarray(got), np.asarray(activation_fn(tf.matmul(rows, kernel) + bias)), atol=1e-5))


class FusedKernels:
    """A model's blocks' intermediate layers on the fused kernel while `active()` (see the
    module's docstring): those of the blocks whose activation the kernel has
    (`FUSED_ACTIVATIONS`) that compute in float32 (as the original's, with a bias and the
    block's activation applied after the layer); products of many rows run the activation apart
    where the CPU wants it (`activation_apart`)."""

    def __init__(self, model: keras.Model):
        blocks = [block for block in blocks_with_fused_activation(model)
                  if block.intermediate.compute_dtype == "float32" and block.intermediate.use_bias
                  and block.intermediate.activation is keras.activations.linear]
        fuses = {fn: dense_fuses(fn, FUSED_ACTIVATIONS[fn]) for fn in {block.intermediate_act for block in blocks}}
        self.blocks = [block for block in blocks if fuses[block.intermediate_act]]
        self.products = [(block.intermediate,
                          _fused_dense_call(block.intermediate, FUSED_ACTIVATIONS[block.intermediate_act],
                                            activation_apart.for_products(block.intermediate_act)))
                         for block in self.blocks]
        if self.blocks:
            logger.info("prediction multiplies %d blocks' intermediate layers with their activation fused",
                        len(self.blocks))

    def active(self):
        """Inside: what is traced runs the fused kernels."""
        return replaced_products(self.products, self.blocks)


def block_dense_layers(model: keras.Model) -> list[keras.layers.Dense]:
    """The dense layers of every Transformer block of `model`, in the blocks' order."""
    layers = []
    for block in model._flatten_layers(include_self=True, recursive=True):
        if isinstance(block, TransformerBlock):
            attention = block.attention
            layers += [attention.query, attention.key, attention.value, block.attention_output,
                       block.intermediate, block.output_dense]
    return layers


def blocks_with_fused_activation(model: keras.Model) -> list[TransformerBlock]:
    """The Transformer blocks of `model` whose activation a product can apply (`FUSED_ACTIVATIONS`)."""
    return [block for block in model._flatten_layers(include_self=True, recursive=True)
            if isinstance(block, TransformerBlock) and block.intermediate_act in FUSED_ACTIVATIONS]


@contextlib.contextmanager
def replaced_products(products: Sequence[tuple[keras.layers.Layer, Callable]],
                      activated_blocks: Sequence[TransformerBlock]):
    """Inside: each (layer, product) of `products` has the layer call the product (a dense
    layer's: inputs [..., K] -> [..., N]; a LayerNorm's: [..., H] -> [..., H]), and the blocks
    of `activated_blocks` skip their own activation (their intermediate layer's product applies
    it)."""
    own_activations = [block.intermediate_act for block in activated_blocks]
    for layer, product in products:
        layer.call = product
    for block in activated_blocks:
        block.intermediate_act = activations.linear
    try:
        yield
    finally:
        for layer, _ in products:
            del layer.call
        for block, activation in zip(activated_blocks, own_activations):
            block.intermediate_act = activation


def _fused_dense_call(layer: keras.layers.Dense, activation: str, apart: Callable | None):
    def call(inputs, *args, **kwargs):  # (Keras may pass `training`)
        kernel = layer.kernel  # (a LoRA-adapted layer's: already the merged tensor)
        return fused_dense(inputs, getattr(kernel, "value", kernel), layer.bias.value, activation, apart)
    return call
