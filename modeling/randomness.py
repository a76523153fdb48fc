"""Where dropout and Progressive Layer Dropping draw their random values.

Used as plain Keras layers, our dropout layers behave like `keras.layers.Dropout`: each call
advances a counter in the layer's seed state. A training driver instead wraps the computation
of one replica's micro-batch in `random_stream(step, stream)`; inside it every draw is a pure
function of (the layer's initial seed, `step`, `stream`):

* replicas, machines and micro-batches of one step (different `stream`) draw independent
  values, where a mirrored seed state alone would give every replica the same masks;
* the same (step, stream) draws the same values, so a run resumed from a checkpoint at step N
  draws what the uninterrupted run drew, and a global batch cut into the same micro-batch
  shapes draws the same per-example masks whether its pieces go to replicas or to accumulated
  micro-batches.

In a stream, each seed generator must be drawn from once per forward pass (each dropout site
and PLD gate has its own).
"""

import contextlib
import contextvars

import keras
from keras import ops

from modeling.layers import serializable

# A prime above the largest initial seed (Keras draws them from [1, 1e9]): streams of one
# generator do not land on another generator's initial seed (modulo the int32 range).
_STREAM_MULTIPLIER = 1_000_000_007
# ContextVar, not a module global: MirroredStrategy traces each replica in its own thread.
_CURRENT = contextvars.ContextVar("random_stream", default=None)


@contextlib.contextmanager
def random_stream(step, stream):
    """Draws inside come from stream `stream` of optimizer step `step` (ints or int tensors)."""
    token = _CURRENT.set((step, stream))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def second_pass():
    """Inside `random_stream(step, stream)`: the draws of a second forward pass of the same
    micro-batch (R-Drop's) come from a stream of their own, -1 - stream (regular streams are
    >= 0), so the two passes drop different units and a resumed run draws both again. Outside a
    stream nothing changes (the layers' own counters move on between passes)."""
    current = _CURRENT.get()
    if current is None:
        yield
        return
    step, stream = current
    token = _CURRENT.set((step, -1 - stream))
    try:
        yield
    finally:
        _CURRENT.reset(token)


class StreamSeedGenerator(keras.random.SeedGenerator):
    """A `keras.random.SeedGenerator` whose seeds, inside `random_stream`, are
    `[initial seed + stream * p, step]` (its counter untouched); outside, Keras' own."""

    def next(self, ordered=True):
        current = _CURRENT.get()
        if current is None:
            return super().next(ordered)
        step, stream = current
        dtype = self.state.dtype
        initial = self.state.value[0]
        first = initial + ops.cast(stream, dtype) * ops.cast(_STREAM_MULTIPLIER, dtype)
        return ops.stack([first, ops.cast(step, dtype)])


@serializable
class Dropout(keras.layers.Layer):
    """`keras.layers.Dropout(rate)` drawing from a `StreamSeedGenerator`. Shapes: any -> same."""

    def __init__(self, rate, **kwargs):
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.seed_generator = StreamSeedGenerator() if self.rate > 0 else None
        self.built = True

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate}
