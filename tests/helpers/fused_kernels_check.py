"""What `inference.fused_kernels` computes, measured in a process where TensorFlow's oneDNN
kernels are on (the test suite turns them off for its own processes): prints one JSON object.

    TF_ENABLE_ONEDNN_OPTS=1 python tests/helpers/fused_kernels_check.py
"""

import contextlib
import json
import math

import keras
import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.inference import activation_apart
from bert_realformer.inference.fused_kernels import fused_dense
from bert_realformer.inference.predictor import Predictor

# The formulas written out in NumPy (float64): the independent truth.
NUMPY_ACTIVATIONS = {
    "GeluApproximate": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "GeluExact": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "Relu": lambda x: np.maximum(x, 0),
    "Tanh": np.tanh,
}


def product_errors(rng):
    """The largest difference of the fused product with each activation from its formula in NumPy."""
    x = rng.standard_normal((2, 7, 48)).astype(np.float32)
    kernel = rng.standard_normal((48, 20)).astype(np.float32) * 0.3
    bias = rng.standard_normal(20).astype(np.float32)
    before = x.astype(np.float64) @ kernel + bias
    errors = {}
    for name, formula in NUMPY_ACTIVATIONS.items():
        got = np.asarray(tf.function(fused_dense)(x, kernel, bias, name), np.float64)
        errors[name] = float(np.abs(got - formula(before)).max())
        if name == "GeluApproximate":  # (far from the other formula: the kernels tell them apart)
            errors["GeluApproximate_vs_erf"] = float(np.abs(got - NUMPY_ACTIVATIONS["GeluExact"](before)).max())
    # The GELU apart, compiled by XLA, on as many rows as need it (`activation_apart`).
    many = rng.standard_normal((activation_apart.MIN_ROWS + 8, 48)).astype(np.float32)
    apart = activation_apart.compiled(modeling.activations.gelu)
    got = np.asarray(tf.function(fused_dense)(many, kernel, bias, "GeluApproximate", apart), np.float64)
    errors["GeluApproximate_apart"] = float(np.abs(got - NUMPY_ACTIVATIONS["GeluApproximate"](
        many.astype(np.float64) @ kernel + bias)).max())
    return errors


def predictions(rng):
    """For each variant: fused vs plain predictions, the fused products in the traced step, and
    the layers' own calls back after tracing."""
    ids = rng.integers(1, 50, (90, 12))  # (a batch of 88 x 12 tokens: the GELU runs apart where wanted)
    mask = np.ones_like(ids)
    mask[3:, 8:] = 0
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(88)
    found = {}
    for layer_norm_type, residual in (("post", "none"), ("pre", "none"), ("post", "sum")):
        config = modeling.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=16,
                                     layer_norm_type=layer_norm_type, residual_attention=residual)
        keras.utils.set_random_seed(1)
        model = modeling.BertClassifier(config, num_labels=3)
        model({k: v[:1] for k, v in features.items()})
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        fused, plain, apart = Predictor(strategy, model), Predictor(strategy, model, cpu_kernels=False), \
            Predictor(strategy, model)
        with gelu_apart(False):
            got = fused.predict(dataset, logits)["logits"]
        want = plain.predict(dataset, logits)["logits"]
        with gelu_apart(True):  # (as on a CPU without AVX-512)
            got_apart = apart.predict(dataset, logits)["logits"]
        found[f"{layer_norm_type}-{residual}"] = {
            "difference": float(np.abs(got - want).max()), "apart_difference": float(np.abs(got_apart - want).max()),
            "fused_products": _op_count(fused, "_FusedMatMul"), "plain_graph": _op_count(plain, "_FusedMatMul"),
            "restored": not any("call" in vars(layer) for layer in model._flatten_layers())}
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # bf16 products: not fused
    try:
        model = modeling.BertClassifier(config, num_labels=3)
        model({k: v[:1] for k, v in features.items()})
        predictor = Predictor(tf.distribute.OneDeviceStrategy("/cpu:0"), model)
        predictor.predict(dataset, logits)
        found["bf16"] = {"fused_products": _op_count(predictor, "_FusedMatMul")}
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return found


@contextlib.contextmanager
def gelu_apart(wanted):
    """Inside: the products run the GELU apart (`activation_apart`) as `wanted`, whatever the CPU."""
    wanted_here = activation_apart.wanted_here
    activation_apart.wanted_here = lambda: wanted
    try:
        yield
    finally:
        activation_apart.wanted_here = wanted_here


def _op_count(predictor, op_type):
    step = next(iter(predictor._steps.values()))
    return sum(op.type == op_type for op in step.get_concrete_function().graph.get_operations())


def logits(model, batch):
    return {"logits": model(batch, training=False)}


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    print(json.dumps({"products": product_errors(rng), "predictions": predictions(rng)}))
