"""int8 prediction on CPUs (`--quantize=int8`): the Transformer blocks' dense layers multiply in
8 bits with oneDNN's u8 x s8 kernels (VNNI where the CPU has it).

Each dense layer of the blocks (query, key, value, attention output, intermediate, output; not
the embeddings, the pooler or a head) has its kernel quantized symmetrically per tensor,
W ~ s_w * W8 with W8 in [-127, 127]. Its input is quantized as it comes, per batch and
asymmetrically, as ONNX Runtime's dynamic quantization does: x ~ s_x * x8 + m, x8 in [0, 255],
m the batch's minimum (or 0), moved onto the grid that holds 0 (`_input_grid`). Then

    x W + b ~ s_x s_w (x8 W8) + (b + m * 1 W)

with 1 W the column sums of s_w * W8; one oneDNN kernel (`_QuantizedMatMul`, which runs with
`TF_ENABLE_ONEDNN_OPTS=0` too) takes the uint8 input, multiplies into int32, scales and adds the
compensated bias; the intermediate layer's kernel also applies the block's activation (GELU:
the same formula, `fused_kernels.FUSED_ACTIVATIONS`; on many rows, on a CPU without AVX-512, the
activation runs after the kernel, compiled by XLA: `activation_apart`). Attention's own
products, the softmax and LayerNorm stay in float. A row's outputs depend a little on the rows
beside it (the input's range is its batch's).

The quantized kernels are variables of their own, refreshed from the float weights before each
prediction (`Int8Layers.refresh`); the model's dense layers run them only inside
`Int8Layers.active()`, so a function traced there runs in int8 and the training step, traced
outside, stays in float. An exported model's kernels keep their weights in oneDNN's layout
after the first call (`active(weights_fixed=True)`: its weights never move); a run's, whose
weights move between evaluations, multiply them as they are (7% slower at batch 1, as fast
at batch 64).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.inference import activation_apart
from bert_realformer.inference.fused_kernels import (
    FUSED_ACTIVATIONS,
    apply_op,
    block_dense_layers,
    blocks_with_fused_activation,
    on_rows,
    replaced_products,
)

logger = logging.getLogger(__name__)

_INT8_STEPS = 127.0


def quantized_product(x, kernel8, weight_range, column_sums, bias, weights_fixed: bool = False,
                      activation: str | None = None, apart: Callable | None = None):
    """x [..., K] float -> x W + b [..., N] float32 (activation(x W + b) with `activation`, one of
    `FUSED_ACTIVATIONS`' values), W ~ weight_range / 127 * kernel8.

    Args:
      kernel8: [K, N] int8 in [-127, 127].
      weight_range: scalar float32, 127 s_w: the largest |W|.
      column_sums: [N] float32, the column sums of s_w * kernel8.
      bias: [N] float32.
      weights_fixed: the kernel keeps `kernel8` in oneDNN's own layout after its first call
        (faster on a few rows): only where `kernel8` never changes afterwards (an exported
        model), as that kernel does not see a later change.
      apart: `activation` compiled by XLA, run after the kernel on many rows (`activation_apart`).
    """
    return on_rows(tf.cast(x, tf.float32), lambda rows: _quantized_rows_product(
        rows, kernel8, weight_range, column_sums, bias, weights_fixed, activation, apart))


def _quantized_rows_product(rows, kernel8, weight_range, column_sums, bias, weights_fixed, activation, apart):
    """`quantized_product` of float32 rows [M, K] -> [M, N]."""
    low, high = _input_grid(tf.reduce_min(rows), tf.reduce_max(rows))
    rows8, low, high = tf.raw_ops.QuantizeV2(input=rows, min_range=low, max_range=high, T=tf.quint8,
                                             mode="MIN_FIRST", ensure_minimum_range=0.0)
    # SCALED mode on the shifted input, whose range is high - low (the kernels' own MIN_FIRST bias
    # compensation is not exact); its scales are range / 255 and weight_range / 127.
    zero = tf.constant(0.0)
    inputs = [rows8, tf.bitcast(kernel8, tf.qint8), bias + low * column_sums, zero, high - low, zero, weight_range]
    return activation_apart.activated(rows, lambda: _fused_quantized_matmul(inputs, weights_fixed, activation),
                                      lambda: _fused_quantized_matmul(inputs, weights_fixed), apart)


def _input_grid(low, high):
    """The input's range [low, high] widened to hold 0 and moved by less than half a step so that
    0 is on its grid (low = -z * step, z an integer; high = low + 255 * step), as ONNX Runtime's
    integer zero point. Both of TensorFlow's QuantizeV2 kernels then agree: oneDNN's rounds
    (x - low) / step, the plain one x / step and low / step apart."""
    low, high = tf.minimum(low, 0.0), tf.maximum(high, 0.0)
    step = tf.maximum((high - low) / 255.0, 1e-12)
    low = -tf.round(-low / step) * step
    return low, low + 255.0 * step


def _fused_quantized_matmul(inputs, weights_fixed, activation=None):
    """oneDNN's `_QuantizedMatMul` with its bias, `activation` (or none) and dequantization fused:
    inputs [u8 rows [M, K], s8 kernel [K, N], float32 bias [N], min, max of the rows' range, min,
    max of the kernel's] -> float32 [M, N]. TensorFlow has no Python wrapper for this op (the public
    `QuantizedMatMulWithBiasAndDequantize` runs an older kernel that converts the kernel's
    layout at every call, slower on a few rows), so it is added to the graph by its
    definition."""
    if tf.executing_eagerly():  # (an op added by its definition needs a graph)
        return tf.function(_fused_quantized_matmul, autograph=False)(inputs, weights_fixed, activation)
    return apply_op(
        "_QuantizedMatMul", name="QuantizedMatMul", device_inputs=inputs, host_inputs=[],
        Tdevice_outputs=[tf.float32], Thost_outputs=[], T1=tf.quint8, T2=tf.qint8, Tbias=tf.float32,
        Tout=tf.float32, U=tf.float32, fused_ops=["BiasAdd", *([activation] if activation else []), "Dequantize"],
        input_quant_mode="SCALED", output_quant_mode="SCALED", is_weight_const=weights_fixed, is_bias_const=False,
        transpose_a=False, transpose_b=False, leakyrelu_alpha=0.2)


class Int8Dense:
    """The int8 form of one `Dense` (no activation): its quantized kernel, weight range and
    column sums as variables, refreshed from the layer's float kernel."""

    def __init__(self, layer: keras.layers.Dense, activation: str | None = None, apart: Callable | None = None):
        if layer.activation is not keras.activations.linear or not layer.use_bias:
            raise ValueError(f"{layer.name}: int8 covers dense layers with a bias and no activation")
        self.layer = layer
        self.activation = activation  # applied in the product (`FUSED_ACTIVATIONS`), or None
        self.apart = apart  # the activation compiled by XLA, for many rows (`activation_apart`), or None
        inputs, units = layer.kernel.shape
        self.kernel8 = tf.Variable(tf.zeros([inputs, units], tf.int8), trainable=False, name="kernel8")
        self.weight_range = tf.Variable(0.0, trainable=False, name="weight_range")
        self.column_sums = tf.Variable(tf.zeros([units]), trainable=False, name="column_sums")
        self.weights_fixed = False

    def refresh(self) -> None:
        """Quantizes the layer's kernel as it is now."""
        kernel = tf.cast(tf.convert_to_tensor(self.layer.kernel), tf.float32)
        weight_range = tf.maximum(tf.reduce_max(tf.abs(kernel)), 1e-12)
        scale = weight_range / _INT8_STEPS
        kernel8 = tf.clip_by_value(tf.round(kernel / scale), -_INT8_STEPS, _INT8_STEPS)
        self.kernel8.assign(tf.cast(kernel8, tf.int8))
        self.weight_range.assign(weight_range)
        self.column_sums.assign(tf.reduce_sum(kernel8, axis=0) * scale)

    def __call__(self, inputs, *args, **kwargs):
        out = quantized_product(inputs, self.kernel8, self.weight_range, self.column_sums,
                                tf.cast(self.layer.bias, tf.float32), self.weights_fixed, self.activation,
                                None if self.weights_fixed else self.apart)  # (an export holds no XLA)
        return tf.cast(out, inputs.dtype)


class Int8Layers:
    """The int8 forms of a model's block dense layers (see the module's docstring); products of
    many rows run the activation apart where the CPU wants it (`activation_apart`)."""

    def __init__(self, model: keras.Model):
        check_int8_kernels()
        # The blocks whose activation the intermediate product applies (their own is skipped).
        self.fused_blocks = blocks_with_fused_activation(model)
        fused = {id(block.intermediate): FUSED_ACTIVATIONS[block.intermediate_act] for block in self.fused_blocks}
        compiled = {id(block.intermediate): activation_apart.for_products(block.intermediate_act)
                    for block in self.fused_blocks}
        self.layers = [Int8Dense(layer, fused.get(id(layer)), compiled.get(id(layer)))
                       for layer in block_dense_layers(model)]
        if not self.layers:
            raise ValueError("the model has no Transformer blocks to quantize")

    @property
    def variables(self) -> list[tf.Variable]:
        return [v for layer in self.layers for v in (layer.kernel8, layer.weight_range, layer.column_sums)]

    def refresh(self) -> None:
        """Quantizes the float weights as they are now."""
        self._refresh()

    @tf.function(autograph=False)
    def _refresh(self):
        for layer in self.layers:
            layer.refresh()

    @contextlib.contextmanager
    def active(self, weights_fixed: bool = False):
        """Inside: the block dense layers compute in int8 (what is traced here keeps it);
        `weights_fixed`: the traced function never runs after a later `refresh` (an exported
        model), so its kernels may keep their weights converted (`quantized_product`), and it
        holds no XLA-compiled activation (`activation_apart`)."""
        for int8 in self.layers:
            int8.weights_fixed = weights_fixed
        try:
            with replaced_products([(int8.layer, int8) for int8 in self.layers], self.fused_blocks):
                yield
        finally:
            for int8 in self.layers:
                int8.weights_fixed = False


def check_int8_kernels() -> None:
    """An `InputError` unless TensorFlow's oneDNN int8 matrix product runs here (a CPU build with
    oneDNN: x86 or Arm Linux, Windows; `TF_ENABLE_ONEDNN_OPTS` may be 0) and gives the right
    numbers."""
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    w = np.array([[0.5, -1.0], [1.0, 0.25], [-0.5, 0.75]], np.float32)
    weight_range = float(np.abs(w).max())
    w8 = np.round(w / weight_range * _INT8_STEPS)
    try:
        with tf.device("/CPU:0"):
            got = quantized_product(tf.constant(x), tf.constant(w8.astype(np.int8)), tf.constant(weight_range),
                                    tf.constant(w8.sum(0) * weight_range / _INT8_STEPS, tf.float32), tf.zeros([2]))
        ok = np.allclose(np.asarray(got), x @ w, atol=0.05)
    except (tf.errors.OpError, TypeError, ValueError, KeyError) as error:
        logger.info("the int8 kernel failed: %s", error)
        ok = False
    if not ok:
        raise InputError("quantize=int8 needs TensorFlow's oneDNN int8 kernels, which this TensorFlow does not "
                         "have (a build without oneDNN)", options=("quantize",))
