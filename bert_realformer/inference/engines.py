"""The prediction engines: how a model's prediction function runs, one class each, named in one
registry (`ENGINES`) that the predictor, the SavedModel export and the checkpoint converter
share, so none of them branches on an engine.

  graph        TensorFlow's graph; on CPUs each block's intermediate product runs with its GELU
               as one kernel (`inference.fused_kernels`) and batches of many rows are normalized
               by oneDNN's LayerNorm (`inference.layer_norm_kernel`)
  xla          the graph compiled by XLA, on one device: batches cut to the length buckets of
               `padding.bucket_step`, a last, partial batch filled up to the first one's size
  int8         the Transformer blocks' dense layers in int8 (`inference.int8`), quantized from
               the weights the model holds when a prediction starts; an export stores them
  tflite       converted to TensorFlow Lite with the current weights, run on this host's CPUs
               (`inference.lite`); an export writes model.tflite beside the SavedModel
  tflite-int8  the same with the converter's dynamic-range int8

The command line names one by `--xla_prediction`, `--quantize=int8` and `--tflite_prediction`
(`engine_for`). An engine is made for one model (`make_engine`); a step it traces for a function
and a batch spec is kept by the predictor and re-used.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.inference.padding import trim_to_bucket, trim_to_longest

if TYPE_CHECKING:  # annotations only
    import contextlib

    import keras

    from bert_realformer.inference.fused_kernels import FusedKernels
    from bert_realformer.inference.layer_norm_kernel import LayerNormKernels

PredictFn = Callable[["keras.Model", dict], dict]  # (model, features) -> {name: [B, ...] tensor}
Within = Callable[[], "contextlib.AbstractContextManager"]  # what a function is traced inside
LITE_MODEL = "model.tflite"  # the TensorFlow Lite model in an export's version directory


class GraphEngine:
    """TensorFlow's graph, and what every engine answers: the defaults the others override.

    `cpu_kernels`: the prediction runs on CPUs alone and may use this project's CPU kernels."""

    name: ClassVar[str] = "graph"
    one_device_only: ClassVar[bool] = False  # under several replicas it gives way to the graph
    on_host: ClassVar[bool] = False  # runs on this host's CPUs whatever the distribution strategy
    writes: ClassVar[str | None] = None  # the file an export of a classifier writes beside it
    trim = staticmethod(trim_to_longest)  # what tasks map over batches of dynamic padding

    def __init__(self, model: keras.Model, cpu_kernels: bool = False):
        self.model = model
        self.cpu_kernels = cpu_kernels

    @functools.cached_property
    def fused(self) -> FusedKernels | None:
        """The fused GELU products' swap, made at the first trace (it tries the kernels), or None."""
        from bert_realformer.inference.fused_kernels import FusedKernels
        return FusedKernels(self.model) if self.cpu_kernels else None

    @functools.cached_property
    def layer_norms(self) -> LayerNormKernels | None:
        """oneDNN's LayerNorm's swap, made at the first trace (it tries the kernel), or None."""
        from bert_realformer.inference.layer_norm_kernel import LayerNormKernels
        return LayerNormKernels(self.model) if self.cpu_kernels else None

    def within(self) -> list[Within]:
        """What a prediction function is traced inside."""
        return [kernels.active for kernels in (self.fused, self.layer_norms) if kernels is not None]

    def refresh(self) -> None:
        """Before each prediction: the model's weights may have moved since the last."""

    def step(self, fn: PredictFn, spec) -> Callable[[dict], dict]:
        """The step that runs `fn` on one batch of `spec` on one device."""
        model, fn = self.model, traced_within(self.within(), fn)

        # (without AutoGraph: the model has no tensor-dependent Python control flow to convert)
        @tf.function(input_signature=[spec], autograph=False)
        def one_device_step(features):
            return fn(model, features)
        return one_device_step

    def outputs(self, step: Callable[[dict], dict], dataset: tf.data.Dataset) -> Iterable[dict]:
        """Each batch's outputs of `step` over `dataset`, in its order."""
        return map(step, dataset)

    def serving_variables(self) -> list[tf.Variable]:
        """The variables an export holds besides the model's."""
        return []

    def serving_within(self) -> list[Within]:
        """What an export's model function is traced inside. (The graph's export keeps the
        model's own ops, which any TensorFlow serves.)"""
        return []

    def serving_files(self, outputs: Callable[[dict], dict], spec: dict) -> dict[str, bytes]:
        """{name: bytes} an export of a classifier writes beside the SavedModel, `outputs` its
        numeric outputs of packed features of `spec`."""
        return {}


class XlaEngine(GraphEngine):
    """The graph compiled by XLA, fusing the elementwise work around the matrix products. XLA
    compiles once per input shape, so the batches reaching it keep to few shapes: their lengths
    are the buckets of `padding.bucket_step` (`trim`), and a last, partial batch is filled up to
    the size of the first with empty rows, whose outputs are dropped."""

    name = "xla"
    one_device_only = True
    trim = staticmethod(trim_to_bucket)

    def __init__(self, model: keras.Model, cpu_kernels: bool = False):
        super().__init__(model, cpu_kernels=False)  # (XLA fuses on its own)

    def step(self, fn: PredictFn, spec) -> Callable[[dict, tf.Tensor], dict]:
        """The compiled step of a batch and the rows [] to fill it up to."""
        model = self.model
        compiled = tf.function(lambda features: fn(model, features), jit_compile=True, autograph=False)

        @tf.function(input_signature=[spec, tf.TensorSpec([], tf.int32)], autograph=False)
        def compiled_step(features, rows):
            real = tf.shape(tf.nest.flatten(features)[0])[0]
            filled = tf.nest.map_structure(lambda value: _fill_rows(value, rows), features)
            return {name: value[:real] for name, value in compiled(filled).items()}
        return compiled_step

    def outputs(self, step, dataset):
        rows = None  # the first batch's size: later (partial) batches are filled up to it
        for features in dataset:
            rows = rows or int(tf.shape(tf.nest.flatten(features)[0])[0])
            yield step(features, tf.constant(rows, tf.int32))


class Int8Engine(GraphEngine):
    """The Transformer blocks' dense layers in int8 (oneDNN's kernels, which XLA does not
    compile); on CPUs batches of many rows are normalized by oneDNN's LayerNorm. An export stores
    the quantized kernels (serving it needs a TensorFlow with oneDNN's kernels) and normalizes
    many rows by that LayerNorm too."""

    name = "int8"

    def __init__(self, model: keras.Model, cpu_kernels: bool = False):
        from bert_realformer.inference.int8 import Int8Layers
        super().__init__(model, cpu_kernels)
        self.int8 = Int8Layers(model)

    @functools.cached_property
    def fused(self) -> None:
        return None  # (the int8 products apply their activation themselves)

    def within(self) -> list[Within]:
        return [self.int8.active, *super().within()]

    def refresh(self) -> None:
        self.int8.refresh()

    def serving_variables(self) -> list[tf.Variable]:
        self.int8.refresh()
        return self.int8.variables

    def serving_within(self) -> list[Within]:
        from bert_realformer.inference.layer_norm_kernel import LayerNormKernels
        return [functools.partial(self.int8.active, weights_fixed=True), LayerNormKernels(self.model).active]


class LiteEngine(GraphEngine):
    """TensorFlow Lite's interpreter on this host's CPUs, float32. A function it cannot run (a
    CRF's Viterbi loop) runs in TensorFlow's graph instead, with a warning."""

    name = "tflite"
    on_host = True
    writes = LITE_MODEL
    int8: ClassVar[bool] = False

    def __init__(self, model: keras.Model, cpu_kernels: bool = False):
        import keras

        from bert_realformer.inference.lite import LiteFunctions
        compute_dtype = keras.backend.standardize_dtype(model.dtype_policy.compute_dtype)
        if compute_dtype != "float32":
            raise InputError(f"tflite_prediction runs float32 (or int8 with quantize=int8); the model computes in "
                             f"{compute_dtype}: leave mixed_precision at none",
                             options=("tflite_prediction", "mixed_precision"))
        super().__init__(model, cpu_kernels=False)
        self.functions = LiteFunctions(model, self.int8)

    def step(self, fn, spec):
        if self.functions.get(fn, spec) is None:
            return super().step(fn, spec)
        return _LiteStep(self.functions, fn, spec)

    def outputs(self, step, dataset):
        if not isinstance(step, _LiteStep):
            return super().outputs(step, dataset)
        return map(step.current(), _read_ahead(dataset))

    def serving_files(self, outputs, spec):
        from bert_realformer.inference.lite import converted
        return {LITE_MODEL: converted(outputs, spec, int8=self.int8)}


class LiteInt8Engine(LiteEngine):
    """TensorFlow Lite with the converter's dynamic-range quantization: weights in int8 per output
    channel, each product's input quantized per row as it comes."""

    name = "tflite-int8"
    int8 = True


ENGINES: Mapping[str, type[GraphEngine]] = MappingProxyType({engine.name: engine for engine in (
    GraphEngine, XlaEngine, Int8Engine, LiteEngine, LiteInt8Engine)})


def engine_for(xla: bool = False, quantize: str = "none", tflite: bool = False) -> str:
    """The engine's name that `--xla_prediction`, `--quantize` and `--tflite_prediction` ask for."""
    if tflite:
        if xla:
            raise InputError("tflite_prediction runs TensorFlow Lite's kernels, not XLA's: leave xla_prediction off",
                             options=("tflite_prediction", "xla_prediction"))
        return "tflite-int8" if quantize == "int8" else "tflite"
    if quantize == "int8":
        if xla:
            raise InputError("quantize=int8 runs oneDNN's int8 kernels, which XLA does not compile: leave "
                             "xla_prediction off", options=("quantize", "xla_prediction"))
        return "int8"
    return "xla" if xla else "graph"


def make_engine(name: str, model: keras.Model, cpu_kernels: bool = False) -> GraphEngine:
    """The engine `name` (one of `ENGINES`) for `model`."""
    if name not in ENGINES:
        raise ValueError(f"no prediction engine {name!r}: one of {', '.join(ENGINES)}")
    return ENGINES[name](model, cpu_kernels)


class _LiteStep:
    """`fn`'s TensorFlow Lite conversion for `spec`, converted again when the weights moved."""

    def __init__(self, functions, fn: PredictFn, spec):
        self._functions, self._fn, self._spec = functions, fn, spec

    def current(self) -> Callable[[dict], dict]:
        return self._functions.get(self._fn, self._spec)


def traced_within(contexts: list[Within], fn: PredictFn) -> PredictFn:
    """`fn` traced inside each of `contexts`."""
    if not contexts:
        return fn

    def traced(model, features):
        with contexts[0]():
            return traced_within(contexts[1:], fn)(model, features)
    return traced


def _fill_rows(value, rows):
    """[b, ...] -> [max(b, rows), ...]: zero rows appended."""
    extra = tf.maximum(rows - tf.shape(value)[0], 0)
    return tf.pad(value, [[0, extra]] + [[0, 0]] * (len(value.shape) - 1))


def _read_ahead(dataset: tf.data.Dataset, batches: int = 64) -> Iterator[dict]:
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
