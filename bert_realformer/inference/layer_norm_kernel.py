"""LayerNorm of many rows by oneDNN's kernel (`_MklLayerNorm`) in float and int8 prediction on
CPUs.

The model's LayerNorm (`modeling.LayerNorm`) runs as seven elementwise ops and two reductions,
each a pass over its [rows, H] input; oneDNN's kernel makes one, about twice as fast on thousands
of rows. Under about 500 rows its fixed cost makes it the slower, so a batch of fewer than
`MIN_ROWS` rows (a serving request) keeps the model's ops: `tf.cond` on the rows.
The same formula (each row's mean and two-pass variance, epsilon inside the root): outputs equal
the model's to about 1e-6.

The kernel is tried once per process against the model's formula; where TensorFlow lacks it (a
build without oneDNN) the model's ops run. Swapped in only while a prediction function is traced
(`LayerNormKernels.active()`), never in training (it has no gradient), nor in a float exported
model (an op of oneDNN's own, which a TensorFlow Serving built without oneDNN cannot run; an int8
export, which needs oneDNN's int8 kernels anyway, has it).
"""

from __future__ import annotations

import functools
import logging

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.inference.fused_kernels import apply_op, on_rows, replaced_products
from modeling.layers import LayerNorm

logger = logging.getLogger(__name__)

MIN_ROWS = 512  # rows (batch x tokens) from which the kernel normalizes them
_TRIAL = np.linspace(-3.0, 5.0, 48, dtype=np.float32).reshape(3, 16) ** 2


def normalized(x, gamma, beta, epsilon: float):
    """x [..., H] float32 -> LayerNorm(x) * gamma + beta [..., H] by oneDNN's kernel."""
    return on_rows(x, lambda rows: apply_op("_MklLayerNorm", name="MklLayerNorm", x=rows, scale=gamma, offset=beta,
                                            epsilon=epsilon))


@functools.cache
def kernel_runs() -> bool:
    """Whether oneDNN's LayerNorm runs here and computes the model's formula (tried once)."""
    layer = LayerNorm(epsilon=1e-3, dtype="float32")  # (whatever the global policy)
    layer.build(_TRIAL.shape)
    layer.gamma.assign(np.linspace(0.5, 2.0, 16, dtype=np.float32))
    layer.beta.assign(np.linspace(-1.0, 1.0, 16, dtype=np.float32))
    x = tf.constant(_TRIAL)
    try:
        got = tf.function(lambda x: normalized(x, layer.gamma.value, layer.beta.value, layer.epsilon),
                          autograph=False)(x)
    except (tf.errors.OpError, TypeError, ValueError, KeyError) as error:
        logger.info("oneDNN's LayerNorm does not run here, the model's ops normalize: %s",
                    str(error).strip().splitlines()[0])
        return False
    return bool(np.allclose(np.asarray(got), np.asarray(layer(x)), atol=1e-5))


class LayerNormKernels:
    """A model's float32 LayerNorms on oneDNN's kernel for `MIN_ROWS` rows or more while
    `active()`; none where the kernel does not run here."""

    def __init__(self, model: keras.Model):
        norms = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
                 if isinstance(layer, LayerNorm) and layer.compute_dtype == "float32"]
        self.layers = norms if norms and kernel_runs() else []
        if self.layers:
            logger.info("prediction normalizes batches of %d rows or more with oneDNN's LayerNorm", MIN_ROWS)

    def active(self):
        """Inside: what is traced runs the kernel on many rows."""
        return replaced_products([(layer, functools.partial(_call, layer)) for layer in self.layers], ())


def _call(layer: LayerNorm, inputs):
    """`layer`'s output for `inputs` [..., H]: by the kernel from `MIN_ROWS` rows, else its own ops."""
    rows = tf.size(inputs) // inputs.shape[-1]
    return tf.cond(rows >= MIN_ROWS,
                   lambda: normalized(inputs, layer.gamma.value, layer.beta.value, layer.epsilon),
                   lambda: LayerNorm.call(layer, inputs))
