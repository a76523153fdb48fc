"""Small building blocks shared by the embeddings, the encoder and the heads."""

import keras
from keras import ops

LAYER_NORM_EPSILON = 1e-12  # the original's tf.contrib.layers.layer_norm default


def create_initializer(initializer_range=0.02):
    """Truncated normal (cut at two standard deviations), as the original `create_initializer`."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis with `gamma`/`beta`, always computed in float32.

    Under mixed precision the statistics of bf16/fp16 activations are taken in float32 and the
    result is cast back to the layer's compute dtype (so no autocasting of inputs or weights).
    """

    def __init__(self, epsilon=LAYER_NORM_EPSILON, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        width = input_shape[-1]
        self.gamma = self.add_weight(name="gamma", shape=(width,), initializer="ones")
        self.beta = self.add_weight(name="beta", shape=(width,), initializer="zeros")

    def call(self, inputs):
        x = ops.cast(inputs, "float32")
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        normed = (x - mean) * ops.rsqrt(variance + self.epsilon)
        return ops.cast(normed * self.gamma + self.beta, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


def dense(units, initializer_range, name, activation=None):
    """A `Dense` with the original's truncated-normal kernel and zero bias ([in, out] kernel)."""
    return keras.layers.Dense(units, activation=activation,
                              kernel_initializer=create_initializer(initializer_range),
                              name=name)
