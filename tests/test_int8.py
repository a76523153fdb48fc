"""int8 prediction (`inference.int8`): the quantized product against its hand-derived error bound
and a NumPy simulation of the same quantization, the model's dense layers in int8 only where
asked, and the refusal where TensorFlow has no int8 kernel."""

import json
import os
import subprocess
import sys

import pytest
from helpers.int8_arithmetic import missing_int8_kernel

from bert_realformer.errors import InputError
from bert_realformer.inference import int8
from bert_realformer.inference.int8 import check_int8_kernels

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "int8_arithmetic.py")


def test_the_int8_product_is_the_quantization_it_claims_and_runs_only_where_asked():
    measured = subprocess.run([sys.executable, HELPER], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"})
    assert measured.returncode == 0, measured.stderr[-3000:]
    product, model = (json.loads(measured.stdout.strip().splitlines()[-1])[k] for k in ("product", "model"))
    # Against float64: not float (an error), within the bound of the quantization steps.
    assert product["error"] > 1e-3 and product["within_bound"]
    # Against the same per-tensor quantization simulated in NumPy: equal up to float32 rounding,
    # far below one input step times a column's weights (what a different rounding would cost).
    assert product["from_simulation"] < 1e-4 < product["step_times_column_norm"]
    assert product["gelu_from_simulation"] < 1e-4  # GELU applied inside the product: the same formula
    # On as many rows as make the GELU run apart, compiled by XLA (`activation_apart`): the same.
    assert product["apart_compiled"] and product["gelu_apart_from_simulation"] < 1e-4
    assert model["dense_layers"] == 2 * 6  # query, key, value, attention output, intermediate, output
    assert model["fused_activations"] == ["GeluApproximate"] * 2  # each block's intermediate GELU
    assert 0 < model["int8_vs_float"] < 0.01
    assert model["float_unchanged"] == 0.0 and model["eager_vs_traced"] < 1e-5  # float outside `active()`
    assert model["weights_fixed_vs_int8"] < 1e-5  # the kernels that keep their converted weights: the same
    # The refreshed kernels follow the weights: int8's output moves as float's does (kernels that
    # kept the old weights would leave it where it was) and stays near it, within int8's error
    # (larger with AVX2's 8-bit products than with VNNI's).
    assert model["int8_moved_by"] > model["moved_by"] / 2
    assert model["moved_int8_vs_float"] < model["moved_by"] / 4
    assert model["traces"] == 1


def test_without_the_int8_kernel_int8_is_refused(monkeypatch):
    monkeypatch.setattr(int8, "_fused_quantized_matmul", missing_int8_kernel)
    with pytest.raises(InputError, match="quantize=int8 needs TensorFlow's oneDNN int8 kernels") as raised:
        check_int8_kernels()
    assert raised.value.options == ("quantize",)


def test_a_run_predicting_in_int8_follows_weights_that_moved_between_predictions():
    """When training moves the weights between two predictions of a run, the next one
    quantizes them anew and its int8 kernels use them (int8 near float both times; the kernels
    that keep their converted weights, an exported model's, would not), in the same step."""
    import keras
    import numpy as np
    import tensorflow as tf

    import modeling
    from bert_realformer.inference.fused_kernels import block_dense_layers
    from bert_realformer.inference.predictor import Predictor

    config = modeling.BertConfig(vocab_size=50, hidden_size=256, num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=1024, max_position_embeddings=32)
    keras.utils.set_random_seed(0)
    model = modeling.BertClassifier(config, num_labels=3)
    ids = np.random.default_rng(3).integers(1, 50, (8, 16))
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(4)
    model({k: v[:1] for k, v in features.items()})

    def logits(model, batch):
        return {"logits": model(batch, training=False)}

    predictor = Predictor(tf.distribute.OneDeviceStrategy("/cpu:0"), model, "int8")
    plain = Predictor(tf.distribute.OneDeviceStrategy("/cpu:0"), model)
    before = predictor.predict(dataset, logits)["logits"]
    float_before = plain.predict(dataset, logits)["logits"]
    layer = block_dense_layers(model)[5]  # the first block's output layer: the weights move (training)
    layer.kernel.assign(-3.0 * layer.kernel)
    after = predictor.predict(dataset, logits)["logits"]
    float_after = plain.predict(dataset, logits)["logits"]
    moved = np.abs(float_after - float_before).max()
    # Kernels still holding the old weights would be off by about `moved`; fresh ones by int8's
    # rounding alone (moved over it: 9-49x over 12 random inits, 5.6x in one more).
    assert np.abs(before - float_before).max() < 0.05 and np.abs(after - float_after).max() < moved / 4
    again = predictor.predict(dataset, logits)["logits"]
    assert predictor.traces == 1
    np.testing.assert_allclose(again, after, atol=1e-6)
