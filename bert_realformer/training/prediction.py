"""Prediction, each prediction function traced once per input spec (`Predictor`): the training
driver's `predict`.

On one device the model runs in a function of its own, outside the distribution strategy (whose
step only adds work there: measurably slower prediction on a CPU). With
`xla` (`--xla_prediction`) XLA compiles that function, fusing the elementwise work around the
matrix products. XLA compiles once per input shape, so the batches reaching it keep to few
shapes: their lengths are the buckets of `padding.bucket_step` (the datasets cut them so,
mapping the driver's `trim`), and a last, partial batch is filled up to the size of the first
with empty rows, whose outputs are dropped. With `int8` (`--quantize=int8`) the Transformer
blocks' dense layers run in int8 (`training.int8`), quantized from the weights the model holds
when `predict` is called. On CPUs without XLA, in float32 each block's intermediate product runs
with its GELU as one kernel (`training.fused_kernels`), and in float32 and int8 batches of many
rows are normalized by oneDNN's LayerNorm (`training.layer_norm_kernel`); `fused_kernels=False`
leaves both out (the same outputs to 1e-6). With `lite` (`--tflite_prediction`) the function
runs converted to TensorFlow Lite with the current weights, on this host's CPUs
(`training.lite`; with `int8`, the converter's dynamic-range int8). On CPUs the batches are
read with tf.data's autotuning off.
"""

import functools
import itertools
import logging
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.training.distribution import on_cpus, without_autotuning
from bert_realformer.training.fused_kernels import FusedKernels
from bert_realformer.training.int8 import Int8Layers
from bert_realformer.training.layer_norm_kernel import LayerNormKernels
from bert_realformer.training.lite import LiteFunctions
from bert_realformer.training.padding import trim_to_bucket, trim_to_longest

logger = logging.getLogger(__name__)
PredictFn = Callable[[keras.Model, dict], dict]  # (model, features) -> {name: [B, ...] tensor}


def _single_device(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.OneDeviceStrategy) or not tf.distribute.has_strategy() and \
        strategy is tf.distribute.get_strategy()


class Predictor:
    """Runs `fn(model, features)` over every batch of a dataset and gathers the outputs in the
    dataset's order: on one device directly (compiled by XLA with `xla`), under several
    replicas with the batches split across them (multi-worker runs predict on this worker
    alone). A step is traced once per (`fn`, the dataset's element spec): batches that differ
    in sequence length (dynamic padding, spec `[None, None]`) share one graph, and a later call
    with the same `fn` re-uses it, so a task passes the same function every call."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, xla: bool = False, int8: bool = False,
                 fused_kernels: bool = True, lite: bool = False):
        if lite:
            _check_lite(model, xla)
        elif xla and int8:
            raise InputError("quantize=int8 runs oneDNN's int8 kernels, which XLA does not compile: leave "
                             "xla_prediction off", options=("quantize", "xla_prediction"))
        self.strategy = strategy
        self.model = model
        self.single_device = _single_device(strategy)
        self.xla = xla and self.single_device
        if xla and not self.single_device:
            logger.warning("prediction is compiled by XLA on one device only; with %d replicas it runs the "
                           "distribution strategy's graph", strategy.num_replicas_in_sync)
        # What the tasks map over their batches of dynamic padding: the length buckets when compiled.
        self.trim = trim_to_bucket if self.xla else trim_to_longest
        self._steps = {}  # (fn, repr of the input spec) -> its traced step
        self.lite = LiteFunctions(model, int8) if lite else None
        self.int8 = Int8Layers(model) if int8 and not lite else None
        self._cpus_only = on_cpus(strategy)
        self._normalizes = fused_kernels and not lite and not self.xla and self._cpus_only
        self._fuses = self._normalizes and not int8

    @functools.cached_property
    def fused(self) -> FusedKernels | None:
        """The fused kernels' swap, made at the first trace (it tries the kernels), or None."""
        return FusedKernels(self.model) if self._fuses else None

    @functools.cached_property
    def layer_norms(self) -> LayerNormKernels | None:
        """oneDNN's LayerNorm's swap, made at the first trace (it tries the kernel), or None."""
        return LayerNormKernels(self.model) if self._normalizes else None

    @property
    def lite_precision(self) -> str | None:
        """"float32" or "int8" where prediction runs in TensorFlow Lite, else None."""
        return self.lite and ("int8" if self.lite.int8 else "float32")

    @property
    def traces(self) -> int:
        """How many times the steps were traced."""
        return sum(step.experimental_get_tracing_count() for step in self._steps.values())

    def predict(self, dataset: tf.data.Dataset, fn: PredictFn) -> dict[str, np.ndarray]:
        """{name: numpy array [N, ...]} of `fn`'s outputs over `dataset`, in its order."""
        if self._cpus_only:
            dataset = without_autotuning(dataset)
        lite = self.lite and self.lite.get(fn, dataset.element_spec)
        if lite:
            return _gathered(map(lite, _read_ahead(dataset)))
        this_worker_only = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        if self.single_device or this_worker_only:
            batches = dataset
        else:
            batches = self.strategy.experimental_distribute_dataset(dataset)
        key = (fn, repr(batches.element_spec))
        if key not in self._steps:
            self._steps[key] = self._step(fn, batches.element_spec, this_worker_only)
        step = self._steps[key]
        if self.int8 is not None:
            self.int8.refresh()
        if not self.xla:
            return _gathered(map(step, batches))
        rows = None  # the first batch's size: later (partial) batches are filled up to it

        def filled_step(features):
            nonlocal rows
            rows = rows or int(tf.shape(tf.nest.flatten(features)[0])[0])
            return step(features, tf.constant(rows, tf.int32))
        return _gathered(map(filled_step, batches))

    def _step(self, fn, spec, this_worker_only):
        strategy, model = self.strategy, self.model
        if self.int8 is not None:
            fn = _within(self.int8.active, fn)
        if self.fused is not None:
            fn = _within(self.fused.active, fn)
        if self.layer_norms is not None:
            fn = _within(self.layer_norms.active, fn)
        # (without AutoGraph: the model has no tensor-dependent Python control flow to convert)
        if self.xla:
            compiled = tf.function(lambda features: fn(model, features), jit_compile=True, autograph=False)

            @tf.function(input_signature=[spec, tf.TensorSpec([], tf.int32)], autograph=False)
            def compiled_step(features, rows):
                real = tf.shape(tf.nest.flatten(features)[0])[0]
                filled = tf.nest.map_structure(lambda value: _fill_rows(value, rows), features)
                return {name: value[:real] for name, value in compiled(filled).items()}
            return compiled_step

        @tf.function(input_signature=[spec], autograph=False)
        def one_device_step(features):
            return fn(model, features)
        if self.single_device or this_worker_only:
            return one_device_step

        @tf.function(input_signature=[spec], autograph=False)
        def distributed_step(features):
            outputs = strategy.run(lambda f: fn(model, f), args=(features,))
            return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}
        return distributed_step


def _gathered(batch_outputs) -> dict[str, np.ndarray]:
    """Each batch's {name: [b, ...]} joined into {name: numpy array [N, ...]}."""
    parts = {}
    for outputs in batch_outputs:
        for name, value in outputs.items():
            parts.setdefault(name, []).append(np.asarray(value))
    return {name: np.concatenate(values) for name, values in parts.items()}


def _read_ahead(dataset: tf.data.Dataset, batches: int = 64):
    """The dataset's batches as numpy arrays, `batches` read before the first of them runs: while
    TensorFlow Lite runs, tf.data's threads rest rather than compete for the CPUs (at batch 1,
    calls interleaved with tf.data took markedly longer). The `batches` come as one element of
    tf.data, padded to a common shape, each cut back in numpy to its own: about half the time of
    reading small batches one by one."""
    if not all(spec.shape.rank is not None for spec in tf.nest.flatten(dataset.element_spec)):
        iterator = dataset.as_numpy_iterator()  # (padding needs every tensor's rank)
        while chunk := list(itertools.islice(iterator, batches)):
            yield from chunk
        return
    with_shapes = dataset.map(lambda features: (features, tf.nest.map_structure(tf.shape, features)))
    for padded, shapes in with_shapes.padded_batch(batches).as_numpy_iterator():
        values, value_shapes = tf.nest.flatten(padded), tf.nest.flatten(shapes)
        for i in range(len(value_shapes[0])):
            yield tf.nest.pack_sequence_as(padded, [np.ascontiguousarray(value[i][tuple(map(slice, shape[i]))])
                                                    for value, shape in zip(values, value_shapes)])


def _check_lite(model: keras.Model, xla: bool) -> None:
    """One-line errors for what TensorFlow Lite prediction cannot be combined with."""
    if xla:
        raise InputError("tflite_prediction runs TensorFlow Lite's kernels, not XLA's: leave xla_prediction off",
                         options=("tflite_prediction", "xla_prediction"))
    if keras.backend.standardize_dtype(model.dtype_policy.compute_dtype) != "float32":
        raise InputError(f"tflite_prediction runs float32 (or int8 with quantize=int8); the model computes in "
                         f"{model.dtype_policy.compute_dtype}: leave mixed_precision at none",
                         options=("tflite_prediction", "mixed_precision"))


def _within(context, fn: PredictFn) -> PredictFn:
    """`fn` traced inside `context()`."""
    def traced_within(model, features):
        with context():
            return fn(model, features)
    return traced_within


def _fill_rows(value, rows):
    """[b, ...] -> [max(b, rows), ...]: zero rows appended."""
    extra = tf.maximum(rows - tf.shape(value)[0], 0)
    return tf.pad(value, [[0, extra]] + [[0, 0]] * (len(value.shape) - 1))
