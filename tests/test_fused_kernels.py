"""Float prediction with the intermediate product and its GELU as one CPU kernel
(`inference.fused_kernels`): the kernel against each formula in NumPy, predictions equal to the
plain graph's for every variant with the fused kernel really in the traced step, and the plain
graph where TensorFlow's kernel does not fuse it."""

import json
import os
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.inference import activation_apart, fused_kernels
from bert_realformer.inference.predictor import Predictor

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "fused_kernels_check.py")


def test_fused_kernels_compute_the_formulas_and_predict_as_the_plain_graph():
    measured = subprocess.run([sys.executable, HELPER], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"})
    assert measured.returncode == 0, measured.stderr[-3000:]
    found = json.loads(measured.stdout.strip().splitlines()[-1])
    products = found["products"]
    assert products.pop("GeluApproximate_vs_erf") > 1e-4  # the tanh GELU (the original's), not the erf one
    for name, error in products.items():  # float32 rounding
        assert error < 1e-5, (name, error)
    assert found["predictions"].pop("bf16")["fused_products"] == 0  # (--mixed_precision=bf16: the plain graph)
    for variant, result in found["predictions"].items():
        assert result["difference"] < 1e-5 and result["apart_difference"] < 1e-5, variant  # (GELU in XLA)
        assert result["fused_products"] == 2 and result["plain_graph"] == 0, variant  # one per block
        assert result["restored"], variant


def _tiny_model(features):
    config = modeling.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=16)
    tf.keras.utils.set_random_seed(2)
    model = modeling.BertClassifier(config, num_labels=2)
    model({k: v[:1] for k, v in features.items()})
    return model


def _tiny_predictions(features, **predictor_options):
    predictor = Predictor(tf.distribute.OneDeviceStrategy("/cpu:0"), _tiny_model(features), **predictor_options)
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(3)
    return predictor, predictor.predict(dataset, lambda m, batch: {"logits": m(batch, training=False)})["logits"]


def test_where_the_kernel_does_not_fuse_the_gelu_prediction_runs_the_plain_graph(monkeypatch):
    """As with the suite's TF_ENABLE_ONEDNN_OPTS=0 (TensorFlow's own kernel, no GELU), and where
    the op is missing altogether."""
    ids = np.random.default_rng(5).integers(1, 50, (5, 10))
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    _, plain = _tiny_predictions(features, cpu_kernels=False)
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"
    predictor, got = _tiny_predictions(features)
    assert predictor.engine.fused.blocks == [] and predictor.engine.fused.products == []
    np.testing.assert_allclose(got, plain, atol=1e-6)

    def missing(op_type, **attributes):
        raise tf.errors.NotFoundError(None, None, f"No registered '{op_type}' OpKernel for 'CPU' devices")
    monkeypatch.setattr(fused_kernels, "apply_op", missing)
    assert not fused_kernels.dense_fuses(tf.nn.relu, "Relu")  # (which this TensorFlow's own kernel fuses)
    monkeypatch.undo()
    assert fused_kernels.dense_fuses(tf.nn.relu, "Relu")


def test_the_activation_runs_apart_only_on_many_rows_and_only_where_wanted():
    """`activation_apart.activated` takes the fused kernel under MIN_ROWS rows, the product without
    the activation and then the compiled activation from MIN_ROWS; no compiled activation: the
    fused kernel always. Only CPUs without AVX-512 want it."""
    def product(rows, with_activation):
        return tf.fill([tf.shape(rows)[0], 2], 1.0 if with_activation else 10.0)

    for rows, apart, expected in ((activation_apart.MIN_ROWS - 1, lambda x: x + 5.0, 1.0),
                                  (activation_apart.MIN_ROWS, lambda x: x + 5.0, 15.0),
                                  (activation_apart.MIN_ROWS, None, 1.0)):
        x = tf.zeros([rows, 3])
        run = tf.function(lambda x: activation_apart.activated(x, lambda: product(x, True), lambda: product(x, False),
                                                               apart))  # noqa: B023 (called at once)
        np.testing.assert_array_equal(np.asarray(run(x)), np.full([rows, 2], expected))
    for flags, wanted in (({"avx2", "fma"}, True), ({"avx2", "fma", "avx512f", "avx512_vnni"}, False)):
        with mock.patch.object(activation_apart, "cpu_flags", lambda: frozenset(flags)):  # noqa: B023
            assert activation_apart.wanted_here() is wanted
    assert activation_apart.for_products(tf.nn.relu, wanted=False) is None
    assert activation_apart.for_products(tf.nn.relu, wanted=True) is not None  # (XLA compiles it here)


def test_the_fused_kernel_is_for_cpus_without_xla_only():
    ids = np.random.default_rng(6).integers(1, 50, (4, 9))
    model = _tiny_model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
    for strategy, fuses in ((tf.distribute.get_strategy(), True), (tf.distribute.MirroredStrategy(["/cpu:0"]), True),
                            (tf.distribute.OneDeviceStrategy("/gpu:0"), False)):
        assert (Predictor(strategy, model).engine.fused is not None) is fuses, strategy
    assert Predictor(tf.distribute.get_strategy(), model, "xla").engine.fused is None
    assert Predictor(tf.distribute.get_strategy(), model, cpu_kernels=False).engine.fused is None
