"""Small building blocks shared by the embeddings, the encoder and the heads, and the shape
helpers of the original `modeling.py` that users' code calls (`get_shape_list`, `assert_rank`,
`reshape_to_matrix`, `reshape_from_matrix`) on Keras 3 ops."""

from collections.abc import Sequence

import keras
from keras import ops

LAYER_NORM_EPSILON = 1e-12  # the original's tf.contrib.layers.layer_norm default
# Registers a layer or model class with Keras, so that `.keras` files hold it by name and
# `keras.models.load_model` rebuilds it once `modeling` is imported.
serializable = keras.saving.register_keras_serializable(package="bert_realformer")


ENCODER_INPUTS = ("input_ids", "input_mask", "token_type_ids")


def int32_inputs(names: Sequence[str], rank: int = 2) -> dict:
    """{name: keras.InputSpec} of int32 inputs of `rank` dimensions, each of them free."""
    return {name: keras.InputSpec(shape=(None,) * rank, dtype="int32", name=name) for name in names}


class DeclaredInputs:
    """A model (mixed in before `keras.Model`) that declares its inputs, so that `export(path)`
    needs no `input_signature`: int32 `input_ids`, `input_mask`, `token_type_ids` [B, S], the batch
    and the sequence length free, and what a task model adds (`input_signature`)."""

    def input_signature(self) -> dict:
        """{name: keras.InputSpec} of what `call` takes."""
        return int32_inputs(ENCODER_INPUTS)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs):
        """`keras.Model.export`, with the declared inputs when no `input_signature` is given. A
        SavedModel's `serve` gives what `call` gives, a list in a dict of outputs as one output
        per item (`all_encoder_layers` as `all_encoder_layers_0`, ...): a signature's outputs
        are flat."""
        if not self.built:
            self.build()
        signature = input_signature or [self.input_signature()]
        if format != "tf_saved_model":
            return super().export(filepath, format=format, verbose=verbose, input_signature=signature, **kwargs)
        archive = keras.export.ExportArchive()
        archive.track(self)
        archive.add_endpoint("serve", lambda inputs: flat_outputs(self(inputs, training=False)),
                             input_signature=signature)
        archive.write_out(filepath, verbose=True if verbose is None else verbose)


def flat_outputs(outputs):
    """A dict of outputs with each list value spread into one key per item (`name_0`, ...);
    any other outputs as they are."""
    if not isinstance(outputs, dict):
        return outputs
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update((f"{name}_{i}", item) for i, item in enumerate(value))
        else:
            flat[name] = value
    return flat


def sentence_embedding(sequence, input_mask, pooling: str = "mean", normalize: bool = False):
    """One vector per sequence: [B, S, H] hidden states and their `input_mask` [B, S] -> [B, H],
    float32. `mean`: the mean over the real tokens ([CLS] and [SEP] included), `cls`: the first
    token's vector; `normalize`: each divided by its L2 norm."""
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling={pooling!r}: expected 'mean' or 'cls'")
    sequence = ops.cast(sequence, "float32")
    if pooling == "cls":
        pooled = sequence[:, 0, :]
    else:
        mask = ops.cast(input_mask, "float32")[:, :, None]
        pooled = ops.sum(sequence * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
    return l2_normalized(pooled) if normalize else pooled


def l2_normalized(vectors):
    """[B, H] vectors each divided by its L2 norm (a zero vector stays zero)."""
    return vectors / ops.maximum(ops.norm(vectors, axis=-1, keepdims=True), 1e-12)


def create_initializer(initializer_range=0.02):
    """Truncated normal (cut at two standard deviations), as the original `create_initializer`."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


@serializable
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


def assert_rank(tensor, expected_rank: int | Sequence[int], name: str | None = None) -> None:
    """A `ValueError` naming the tensor, its rank and shape and the expected rank(s) when the
    rank of `tensor` is not `expected_rank` (an int or a list of allowed ranks)."""
    allowed = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    shape = tuple(tensor.shape)
    if len(shape) not in allowed:
        expected = " or ".join(str(r) for r in sorted(allowed))
        raise ValueError(f"{name or 'the tensor'} must have rank {expected}, got rank {len(shape)} "
                         f"(shape {list(shape)})")


def get_shape_list(tensor, expected_rank: int | Sequence[int] | None = None, name: str | None = None) -> list:
    """The shape as a list: Python ints where the size is static, scalar tensors where it is
    dynamic (inside a traced function with unknown dimensions)."""
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    static = list(tensor.shape)
    if all(dim is not None for dim in static):
        return [int(dim) for dim in static]
    dynamic = ops.shape(tensor)
    return [int(dim) if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def reshape_to_matrix(tensor):
    """[..., width] -> [-1, width] (a matrix as is); rank below 2 is a `ValueError`."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(f"reshape_to_matrix needs rank 2 or more, got rank {len(shape)} (shape {list(shape)})")
    return tensor if len(shape) == 2 else ops.reshape(tensor, (-1, shape[-1]))


def reshape_from_matrix(matrix, orig_shape_list: Sequence):
    """[-1, width] back to `orig_shape_list[:-1] + [width]` (what `reshape_to_matrix` undid)."""
    if len(orig_shape_list) == 2:
        return matrix
    return ops.reshape(matrix, (*orig_shape_list[:-1], get_shape_list(matrix)[-1]))


def dense_names(prefix: str, layer) -> list[tuple[str, keras.Variable]]:
    """[(TF1 name, variable)] of a dense layer: `prefix/kernel`, `prefix/bias` (a LoRA-adapted
    layer's kernel as one `MergedLoraKernel`)."""
    kernel = MergedLoraKernel(layer) if layer.lora_enabled else layer.kernel
    return [(f"{prefix}/kernel", kernel), (f"{prefix}/bias", layer.bias)]


class MergedLoraKernel:
    """The kernel of a LoRA-adapted `Dense` as one plain weight, where checkpoints see it: read,
    it is the merged W + (alpha / r) A B [in, out] in W's dtype; assigned, W takes the value and B
    is zeroed, so the layer computes exactly the assigned kernel. Checkpoints written through TF1
    names therefore hold plain kernels, which any consumer reads unchanged."""
    trainable = False

    def __init__(self, layer: keras.layers.Dense):
        self.layer = layer

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.layer._kernel.shape)

    @property
    def dtype(self) -> str:
        return self.layer._kernel.dtype

    @property
    def value(self):
        layer = self.layer
        delta = ops.matmul(layer.lora_kernel_a, layer.lora_kernel_b) * (layer.lora_alpha / layer.lora_rank)
        return ops.cast(ops.add(ops.cast(layer._kernel, "float32"), delta), layer._kernel.dtype)

    def numpy(self):
        return ops.convert_to_numpy(self.value)

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def assign(self, value) -> None:
        self.layer._kernel.assign(value)
        self.layer.lora_kernel_b.assign(ops.zeros(self.layer.lora_kernel_b.shape))


def layer_norm_names(prefix: str, layer) -> list[tuple[str, keras.Variable]]:
    """[(TF1 name, variable)] of a LayerNorm: `prefix/beta`, `prefix/gamma`."""
    return [(f"{prefix}/beta", layer.beta), (f"{prefix}/gamma", layer.gamma)]
