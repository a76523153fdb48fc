"""The original optimizer and schedule against hand-worked equations and the original's test."""

import math

import keras
import numpy as np
import tensorflow as tf
from helpers import script_processes

from bert_realformer.training.optimization import (
    AdamWeightDecay,
    Lamb,
    WarmupLinearDecay,
    clip_by_global_norm,
    create_optimizer,
)


def test_original_adam_test_converges():
    """optimization_test.py of the original: 100 steps at lr 0.2 reach the target within 1e-2."""
    w = keras.Variable(np.array([0.1, -0.2, -0.1], "float32"), name="w")
    x = tf.constant([0.4, 0.2, -0.5])
    optimizer = AdamWeightDecay(learning_rate=0.2)
    for _ in range(100):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x - w.value))
        optimizer.apply_gradients([(tape.gradient(loss, w.value), w)])
    np.testing.assert_allclose(w.numpy(), [0.4, 0.2, -0.5], rtol=1e-2, atol=1e-2)


def test_adamw_update_equations_by_hand():
    """Two steps; weight decay applies to `kernel`, not to `layer_norm_gamma` or `bias`."""
    kernel = keras.Variable(np.array([1.0, -2.0], "float32"), name="kernel")
    gamma = keras.Variable(np.array([0.5], "float32"), name="layer_norm_gamma")
    bias = keras.Variable(np.array([0.25], "float32"), name="bias")
    optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.01)
    grads = [np.array([0.3, -0.6], "float32"), np.array([2.0], "float32"), np.array([-1.0], "float32")]
    expected = {"kernel": np.array([1.0, -2.0]), "gamma": np.array([0.5]), "bias": np.array([0.25])}
    m = {k: 0.0 for k in expected}
    v = {k: 0.0 for k in expected}
    for _ in range(2):
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], [kernel, gamma, bias]))
        for (name, g) in zip(expected, grads):
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            update = m[name] / (np.sqrt(v[name]) + 1e-6)  # no bias correction
            if name == "kernel":
                update = update + 0.01 * expected[name]
            expected[name] = expected[name] - 0.1 * update
    np.testing.assert_allclose(kernel.numpy(), expected["kernel"], rtol=1e-6)
    np.testing.assert_allclose(gamma.numpy(), expected["gamma"], rtol=1e-6)
    np.testing.assert_allclose(bias.numpy(), expected["bias"], rtol=1e-6)


def test_adamw_first_step_against_values_worked_on_paper():
    """Step 1 (no bias correction): m = 0.1 g, v = 0.001 g^2, so the Adam ratio
    m / (sqrt(v) + 1e-6) is 0.03 / 0.009487833 = 3.1619444 for g = 0.3, -0.06 / 0.018974666 =
    -3.1621110 for g = -0.6 and 0.2 / 0.063246553 = 3.1622277 for g = 2. The kernel decays:
    1 - 0.1 (3.1619444 + 0.01 * 1) = 0.6828056, -2 - 0.1 (-3.1621110 + 0.01 * -2) = -1.6817889;
    layer_norm_gamma does not: 0.5 - 0.1 * 3.1622277 = 0.1837772."""
    kernel = keras.Variable(np.array([1.0, -2.0], "float32"), name="kernel")
    gamma = keras.Variable(np.array([0.5], "float32"), name="layer_norm_gamma")
    optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.01)
    optimizer.apply_gradients([(tf.constant([0.3, -0.6]), kernel), (tf.constant([2.0]), gamma)])
    np.testing.assert_allclose(kernel.numpy(), [0.6828056, -1.6817889], atol=2e-7)
    np.testing.assert_allclose(gamma.numpy(), [0.1837772], atol=2e-7)


def test_schedule_warmup_then_linear_decay():
    schedule = WarmupLinearDecay(1e-4, num_train_steps=1000, num_warmup_steps=100)
    values = [float(schedule(s)) for s in (0, 50, 99, 100, 550, 1000, 1500)]
    np.testing.assert_allclose(values, [0.0, 0.5e-4, 0.99e-4, 0.9e-4, 0.45e-4, 0.0, 0.0], atol=1e-10)
    assert float(WarmupLinearDecay(2.0, 10, 0)(5)) == 1.0


def test_clip_by_global_norm_matches_tensorflow():
    grads = [tf.constant([3.0, 4.0]), None, tf.constant([[12.0]])]
    clipped, norm = clip_by_global_norm(grads, 1.0)
    expected, expected_norm = tf.clip_by_global_norm([grads[0], grads[2]], 1.0)
    assert clipped[1] is None and math.isclose(float(norm), 13.0, rel_tol=1e-6)
    np.testing.assert_allclose(clipped[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(clipped[2], expected[1], rtol=1e-6)
    small, _ = clip_by_global_norm([tf.constant([0.3, 0.4])], 1.0)
    np.testing.assert_allclose(small[0], [0.3, 0.4])


def test_lamb_one_step_by_hand():
    w = keras.Variable(np.array([3.0, 4.0], "float32"), name="kernel")
    g = np.array([0.1, -0.2], "float32")
    Lamb(learning_rate=0.1, weight_decay_rate=0.01).apply_gradients([(tf.constant(g), w)])
    m_hat, v_hat = g, g * g  # bias-corrected first step
    update = m_hat / (np.sqrt(v_hat) + 1e-6) + 0.01 * np.array([3.0, 4.0])
    ratio = 5.0 / np.linalg.norm(update)
    np.testing.assert_allclose(w.numpy(), np.array([3.0, 4.0]) - 0.1 * ratio * update, rtol=1e-5)


def test_create_optimizer_is_the_originals():
    optimizer = create_optimizer(5e-5, 100, 10)
    assert isinstance(optimizer, AdamWeightDecay) and optimizer.weight_decay_rate == 0.01
    assert optimizer.epsilon == 1e-6
    assert isinstance(create_optimizer(5e-5, 100, 10, optimizer="lamb"), Lamb)


def test_on_two_replicas_the_gradient_is_not_reduced_again():
    """The training loop hands `apply` gradients it has summed across replicas already; a
    second all-reduce would double them (epsilon 1: the update grows with the gradient)."""
    import json
    import os
    import sys
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "optimizer_replicas.py")
    result = script_processes.run([sys.executable, helper], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(values) == 2

    def updated(g):
        m, v = 0.1 * g, 0.001 * g * g  # one step from zero slots, no bias correction
        return np.array([1.0, -2.0]) - 0.1 * m / (np.sqrt(v) + 1.0)

    once, twice = updated(np.array([0.3, -0.6])), updated(np.array([0.6, -1.2]))
    assert np.abs(once - twice).max() > 1e-3  # the test can tell them apart
    for value in values.values():
        np.testing.assert_allclose(value, once, rtol=1e-6)


def _three_variables():
    """A kernel (decayed), a LayerNorm gamma and a bias (both excluded from weight decay)."""
    return [keras.Variable(np.array([1.0, -2.0, 0.5], "float32"), name="kernel"),
            keras.Variable(np.array([0.9, 1.1], "float32"), name="layer_norm_gamma"),
            keras.Variable(np.array([0.25], "float32"), name="bias")]


def _gradients(steps):
    rng = np.random.default_rng(0)
    return [[rng.normal(size=n).astype("float32") for n in (3, 2, 1)] for _ in range(steps)]


def test_adamw_with_bias_correction_by_hand():
    """Five steps of Adam's corrected moments, m_hat = m / (1 - 0.9^t) and v_hat = v / (1 -
    0.999^t), update m_hat / (sqrt(v_hat) + 1e-6), weight decay on the kernel only; at step 1
    the step is lr * sign(g) (m_hat = g, v_hat = g^2), where the original moves 0.1 / sqrt(0.001)
    = 3.16 times further for any g."""
    variables = _three_variables()
    optimizer = AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.01, bias_correction=True)
    expected = [v.numpy().astype("float64") for v in variables]
    m = [np.zeros_like(w) for w in expected]
    v = [np.zeros_like(w) for w in expected]
    for t, grads in enumerate(_gradients(5), start=1):
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            update = (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-6)
            if i == 0:
                update = update + 0.01 * expected[i]
            expected[i] = expected[i] - 0.01 * update
        if t == 1:
            first = [np.array([1.0, -2.0, 0.5]) * (1 - 0.01 * 0.01), np.array([0.9, 1.1]), np.array([0.25])]
            for w, start, g in zip(variables, first, grads):
                np.testing.assert_allclose(w.numpy(), start - 0.01 * np.sign(g), atol=2e-6)
    for w, e in zip(variables, expected):
        np.testing.assert_allclose(w.numpy(), e, rtol=1e-5, atol=1e-7)


def test_bias_correction_off_is_the_original_bit_for_bit():
    """The default and `bias_correction=False` make exactly the original's updates (the
    equations of `test_adamw_update_equations_by_hand`), with a clipping scale too."""
    results = []
    for kwargs in ({}, {"bias_correction": False}):
        variables = _three_variables()
        optimizer = AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.01, **kwargs)
        for grads in _gradients(3):
            optimizer.apply([tf.constant(g) for g in grads], variables, scale=tf.constant(0.5))
        results.append([v.numpy() for v in variables])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    expected = [v.numpy().astype("float64") for v in _three_variables()]
    m = [np.zeros_like(w) for w in expected]
    v = [np.zeros_like(w) for w in expected]
    for grads in _gradients(3):
        for i, g in enumerate(grads):
            g = 0.5 * g
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            update = m[i] / (np.sqrt(v[i]) + 1e-6) + (0.01 * expected[i] if i == 0 else 0.0)
            expected[i] = expected[i] - 0.01 * update
    for w, e in zip(results[0], expected):
        np.testing.assert_allclose(w, e, rtol=1e-5, atol=1e-7)


def test_create_optimizer_passes_bias_correction_to_adamw_only():
    assert create_optimizer(5e-5, 100, 10).bias_correction is False
    assert create_optimizer(5e-5, 100, 10, adam_bias_correction=True).bias_correction is True
    assert create_optimizer(5e-5, 100, 10, optimizer="lamb", adam_bias_correction=False).bias_correction is True
