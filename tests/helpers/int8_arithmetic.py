"""What `inference.int8` computes, measured in a process where TensorFlow's oneDNN kernels are on
(the test suite turns them off for its own processes): prints one JSON object.

    TF_ENABLE_ONEDNN_OPTS=1 python tests/helpers/int8_arithmetic.py
"""

import json

import keras
import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.inference import activation_apart
from bert_realformer.inference.fused_kernels import block_dense_layers
from bert_realformer.inference.int8 import Int8Layers, quantized_product
from modeling import activations


def missing_int8_kernel(inputs, weights_fixed, activation=None):
    """What a TensorFlow built without oneDNN answers for the int8 product (a test puts it in
    place of `inference.int8._fused_quantized_matmul`)."""
    raise tf.errors.NotFoundError(None, None, "No registered '_QuantizedMatMul' OpKernel for 'CPU' devices")


def product_errors(rng):
    """The int8 product of a signed input with an outlier column against (a) float64 and (b) the
    same per-tensor quantization simulated in NumPy, and the hand bound on (a):
    |x W - x^ W^| <= sum_k |x_k| s_w / 2 + |W_kn| s_x / 2 + s_x s_w / 4."""
    x = rng.standard_normal((48, 96)).astype(np.float32)
    x[:, 3] *= 8.0
    w = (rng.standard_normal((96, 40)) * 0.05).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    s_w = np.abs(w).max() / 127.0
    w8 = np.clip(np.round(w / s_w), -127, 127)
    got = quantized_product(tf.constant(x), tf.constant(w8.astype(np.int8)), tf.constant(127 * s_w, tf.float32),
                            tf.constant((w8.sum(0) * s_w).astype(np.float32)), tf.constant(b))
    got = np.asarray(got, np.float64)
    exact = x.astype(np.float64) @ w + b
    s_x = (max(x.max(), 0) - min(x.min(), 0)) / 255.0
    zero_point = np.round(-min(x.min(), 0) / s_x)  # (0 on the input's grid)
    simulated = (s_x * (np.clip(np.round(x / s_x) + zero_point, 0, 255) - zero_point)) @ (s_w * w8) + b
    bound = np.abs(x) @ np.full_like(w, s_w / 2) + (s_x / 2) * np.abs(w).sum(0) + x.shape[1] * s_x * s_w / 4
    gelu = quantized_product(tf.constant(x), tf.constant(w8.astype(np.int8)), tf.constant(127 * s_w, tf.float32),
                             tf.constant((w8.sum(0) * s_w).astype(np.float32)), tf.constant(b),
                             activation="GeluApproximate")
    simulated_gelu = np.asarray(activations.gelu(tf.constant(simulated, tf.float32)), np.float64)
    # Enough rows for the GELU to run apart, compiled by XLA: the same rows again and again (the
    # same range, so the same quantization) give the same numbers.
    apart = activation_apart.compiled(activations.gelu)
    copies = activation_apart.MIN_ROWS // len(x) + 1
    column_sums = tf.constant((w8.sum(0) * s_w).astype(np.float32))
    gelu_apart = quantized_product(tf.constant(np.tile(x, (copies, 1))), tf.constant(w8.astype(np.int8)),
                                   tf.constant(127 * s_w, tf.float32), column_sums, tf.constant(b),
                                   activation="GeluApproximate", apart=apart)
    gelu_apart = np.asarray(gelu_apart, np.float64).reshape(copies, *simulated.shape)
    return {"error": float(np.abs(got - exact).max()), "within_bound": bool(np.all(np.abs(got - exact) <= bound)),
            "gelu_from_simulation": float(np.abs(np.asarray(gelu, np.float64) - simulated_gelu).max()),
            "apart_compiled": apart is not None,
            "gelu_apart_from_simulation": float(np.abs(gelu_apart - simulated_gelu).max()),
            "bound": float(bound.max()), "from_simulation": float(np.abs(got - simulated).max()),
            "step_times_column_norm": float(s_x * np.abs(s_w * w8).sum(0).max())}


def model_checks(rng):
    """A tiny encoder: int8 only inside `active()`, traced once, following refreshed weights."""
    config = modeling.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64)
    keras.utils.set_random_seed(int(rng.integers(2**31)))
    model = modeling.BertModel(config)
    features = {"input_ids": tf.constant(rng.integers(0, 100, (4, 12)), tf.int32),
                "input_mask": tf.ones((4, 12), tf.int32), "token_type_ids": tf.zeros((4, 12), tf.int32)}
    model(features)
    int8 = Int8Layers(model)
    int8.refresh()

    @tf.function
    def quantized(features):
        with int8.active():
            return model(features, training=False)["sequence_output"]

    @tf.function
    def plain(features):
        return model(features, training=False)["sequence_output"]

    @tf.function
    def exported(features):  # (as a SavedModel traces it: its kernels keep their converted weights)
        with int8.active(weights_fixed=True):
            return model(features, training=False)["sequence_output"]

    floats, int8_out, floats_after = (np.asarray(f(features)) for f in (plain, quantized, plain))
    fixed_out = [np.asarray(exported(features)) for _ in range(2)]
    eager_after = np.asarray(model(features, training=False)["sequence_output"])
    layer = block_dense_layers(model)[4]  # the first block's intermediate layer
    layer.kernel.assign(layer.kernel * -3.0)  # the weights move (training): the next refresh follows
    int8.refresh()
    moved_float, moved_int8 = np.asarray(plain(features)), np.asarray(quantized(features))
    return {"dense_layers": len(int8.layers),
            "fused_activations": [layer.activation for layer in int8.layers if layer.activation],
            "int8_vs_float": float(np.abs(int8_out - floats).max()),
            "float_unchanged": float(np.abs(floats_after - floats).max()),
            "weights_fixed_vs_int8": max(float(np.abs(out - int8_out).max()) for out in fixed_out),
            "eager_vs_traced": float(np.abs(eager_after - floats).max()),
            "moved_int8_vs_float": float(np.abs(moved_int8 - moved_float).max()),
            "moved_by": float(np.abs(moved_float - floats).max()),
            "int8_moved_by": float(np.abs(moved_int8 - int8_out).max()),
            "traces": quantized.experimental_get_tracing_count()}


if __name__ == "__main__":
    generator = np.random.default_rng(7)
    print(json.dumps({"product": product_errors(generator), "model": model_checks(generator)}))
