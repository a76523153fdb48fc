"""The intermediate product's activation (GELU) run apart from the product, compiled by XLA,
on CPUs without AVX-512, for the fused float kernel (`inference.fused_kernels`) and the int8 one
(`inference.int8`).

oneDNN applies the activation inside those products, but on a CPU without AVX-512 its GELU there
is slow: with it inside, the intermediate product takes far longer than the product alone plus
XLA's one loop over its output (measured on an AMD EPYC Zen 3 with `bench/fused_kernels.py`). So
from `MIN_ROWS` rows (tokens of a batch) the product leaves the activation out and this runs it.
Under `MIN_ROWS` (a batch of one short text) the fused kernel stays: the gain is nil there and
XLA compiles once per shape. On AVX-512 CPUs it is not used (not measured there).
The same formula: float outputs equal the fused kernel's to about 2e-7.

Not in an exported model: a SavedModel that holds an XLA-compiled function needs XLA where it
is served (TensorFlow Serving compiles none on CPUs unless told to).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from bert_realformer.cpus import cpu_flags

logger = logging.getLogger(__name__)

MIN_ROWS = 1024  # rows of the product (batch x tokens) from which the activation runs apart
_TRIAL = np.linspace(-4.0, 4.0, 64, dtype=np.float32).reshape(4, 16)


def wanted_here() -> bool:
    """Whether this CPU runs the activation apart (it lacks AVX-512)."""
    return "avx512f" not in cpu_flags()


@functools.cache
def compiled(activation_fn: Callable) -> Callable | None:
    """`activation_fn` compiled by XLA, [M, N] -> [M, N]; None where XLA cannot compile it here
    or gives other numbers (tried once)."""
    fn = tf.function(activation_fn, jit_compile=True, autograph=False)
    try:
        got = np.asarray(fn(tf.constant(_TRIAL)))
    except (tf.errors.OpError, TypeError, ValueError) as error:
        logger.info("XLA does not compile the activation here, oneDNN's kernel applies it: %s",
                    str(error).strip().splitlines()[0])
        return None
    return fn if np.allclose(got, np.asarray(activation_fn(tf.constant(_TRIAL))), atol=1e-5) else None


def for_products(activation_fn: Callable, wanted: bool | None = None) -> Callable | None:
    """The compiled activation the products of this process use (`wanted`: whether to, by
    default `wanted_here()`), or None."""
    return compiled(activation_fn) if (wanted_here() if wanted is None else wanted) else None


def activated(rows, fused: Callable[[], tf.Tensor], unfused: Callable[[], tf.Tensor], apart: Callable | None):
    """A product of `rows` [M, K] with its activation: `fused()` (the activation inside the
    kernel), or with `apart` and at least `MIN_ROWS` rows, `apart(unfused())`. -> [M, N]"""
    if apart is None:
        return fused()
    return tf.cond(tf.shape(rows)[0] >= MIN_ROWS, lambda: apart(unfused()), fused)
