"""Prediction by TensorFlow Lite on CPUs (`--tflite_prediction`): a prediction function, traced
for the dataset's batches, is frozen with the model's current weights and converted to a
TensorFlow Lite model, which the interpreter runs with its XNNPACK kernels.

At the few dozen rows of a serving request TensorFlow's graph costs more per op than its
products take; the interpreter runs the same ops with a far smaller cost each (BENCHMARKS.md,
"Prediction on a CPU: against transformers and ONNX Runtime"). Its
outputs equal the graph's to float32 round-off. With `int8`, the converter's dynamic-range
quantization: weights in int8 per output channel, each product's input quantized per row as it
comes.

The interpreter takes any batch size and length: a new shape re-plans its tensors (a fraction
of a millisecond), so dynamic padding needs no buckets. The weights are frozen into the Lite
model, so `LiteFunctions` converts again whenever they changed (between a training run's
evaluations), told by a checksum of their bits. A function TensorFlow Lite cannot run (a CRF's
Viterbi loop) runs in TensorFlow's graph instead, with a warning.
"""

import functools
import logging
import re
import time
import warnings
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.cpus import usable_cpu_count
from bert_realformer.errors import InputError

logger = logging.getLogger(__name__)


class LiteFunction:
    """`fn(features) -> {name: tensor}` converted to TensorFlow Lite; called with a dict of
    numpy arrays (or tensors) [B, T, ...] matching `spec`, returns {name: numpy array}."""

    def __init__(self, fn: Callable[[dict], dict], spec: dict, int8: bool = False):
        if not isinstance(spec, dict) or not all(isinstance(s, tf.TensorSpec) for s in spec.values()):
            raise InputError("tflite_prediction needs batches that are a flat dict of tensors",
                             options=("tflite_prediction",))
        named = {name: tf.TensorSpec(s.shape, s.dtype, name=name) for name, s in spec.items()}
        started = time.monotonic()
        self.passed_through, content = _converted(fn, named, int8)
        self.size = len(content)
        self._interpreter = lite_interpreter(content)
        signature = self._interpreter.get_signature_runner()
        self._inputs = signature.get_input_details()  # {feature name: its tensor's details}
        self._outputs = {key: detail["index"] for key, detail in signature.get_output_details().items()}
        self._shapes = None
        logger.info("prediction runs in TensorFlow Lite (%s, %d MB), converted in %.1f s",
                    "int8 dynamic-range" if int8 else "float32", len(content) >> 20, time.monotonic() - started)

    def __call__(self, features: dict) -> dict[str, np.ndarray]:
        arrays = {name: np.asarray(features[name], detail["dtype"]) for name, detail in self._inputs.items()}
        shapes = {name: array.shape for name, array in arrays.items()}
        if shapes != self._shapes:  # (a new batch size or length: re-plan the tensors)
            for name, array in arrays.items():
                self._interpreter.resize_tensor_input(self._inputs[name]["index"], array.shape, strict=True)
            self._interpreter.allocate_tensors()
            self._shapes = shapes
        for name, array in arrays.items():
            self._interpreter.set_tensor(self._inputs[name]["index"], array)
        self._interpreter.invoke()
        outputs = {key: self._interpreter.get_tensor(index).copy() for key, index in self._outputs.items()}
        return {**outputs, **{key: np.asarray(features[name]) for key, name in self.passed_through.items()}}


class LiteFunctions:
    """The Lite conversions of `fn(model, features)` per (fn, input spec), each made again when
    the model's weights changed since; None for a function TensorFlow Lite cannot run."""

    def __init__(self, model: keras.Model, int8: bool = False):
        self.model = model
        self.int8 = int8
        self._held = {}  # (fn, repr(spec)) -> (the weights' checksums, LiteFunction or None)

    def get(self, fn: Callable[[keras.Model, dict], dict], spec: dict) -> "LiteFunction | None":
        key, checksums = (fn, repr(spec)), self._checksums().numpy()
        held = self._held.get(key)
        if held is not None and (held[1] is None or np.array_equal(held[0], checksums)):
            return held[1]
        try:
            lite = LiteFunction(lambda features: fn(self.model, features), spec, self.int8)
        except InputError as error:
            logger.warning("%s: it runs in TensorFlow's graph%s", error, " (float32)" if self.int8 else "")
            lite = None
        self._held[key] = (checksums, lite)
        return lite

    @functools.cached_property
    def _checksums(self):
        """A function: [one int64 per weight], the sum of its values' bits (any training step
        changes it)."""
        variables = [weight.value for weight in self.model.weights]

        def bits(variable):
            if variable.dtype.is_floating:
                variable = tf.bitcast(variable, {2: tf.int16, 4: tf.int32, 8: tf.int64}[variable.dtype.size])
            return tf.reduce_sum(tf.cast(variable, tf.int64))
        return tf.function(lambda: tf.stack([bits(variable) for variable in variables]), autograph=False)


def converted(fn: Callable[[dict], dict], spec: dict, int8: bool = False) -> bytes:
    """The TensorFlow Lite model of `fn(features) -> {name: tensor}` with the weights it reads
    frozen in: signature `serving_default`, inputs and outputs by their names (`spec`'s
    TensorSpecs must be named). `int8`: the converter's dynamic-range quantization."""
    return _converted(fn, spec, int8)[1]


def _converted(fn, spec, int8):
    """({output key: the feature it passes on as it is}, the Lite model's bytes). The outputs
    that are features themselves (an example's index, its label) stay out of the Lite model,
    which would fold them into its inputs."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    passed_through = {}

    def computed(features):
        outputs = fn(features)
        for key, value in outputs.items():
            passed_through.update((key, name) for name, feature in features.items() if value is feature)
        return {key: value for key, value in outputs.items() if key not in passed_through}
    traced = tf.function(computed, input_signature=[spec], autograph=False).get_concrete_function()
    # (frozen first: the converter keeps Keras 3's variables as variables, unread; the frozen
    # function's outputs are a list in the order nest flattens a dict: by sorted key)
    frozen = convert_variables_to_constants_v2(traced)
    keys, used = sorted(traced.structured_outputs), [tensor.name.split(":")[0] for tensor in frozen.inputs]

    @tf.function(input_signature=[spec], autograph=False)
    def named(features):
        return dict(zip(keys, frozen(**{name: features[name] for name in used}), strict=True))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([named.get_concrete_function()], tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if int8:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return passed_through, converter.convert()
    except Exception as error:  # the converter's errors: ConverterError, and others from MLIR
        raise InputError(f"tflite_prediction: TensorFlow Lite cannot run this prediction graph "
                         f"({_reason(str(error))})", options=("tflite_prediction",)) from None


def _reason(message: str) -> str:
    """The converter's many-line error in a few words: the ops it lacks, or its first error."""
    missing = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", message)))
    if missing:
        return "it has no " + ", ".join(missing)
    failed = sorted(set(re.findall(r"'tf\.(\w+)' op", message)))
    if failed:
        return "it cannot convert " + ", ".join(failed)
    first = next((line for line in message.splitlines() if "error:" in line), message.split("\n")[0])
    return first.strip()[:300]


def lite_interpreter(content: bytes, num_threads: int | None = None) -> tf.lite.Interpreter:
    """An interpreter of a TensorFlow Lite model's bytes on `num_threads` threads (None: this
    process's CPUs), its tensors allocated."""
    with warnings.catch_warnings():  # (tf.lite.Interpreter's notice of its move to LiteRT)
        warnings.simplefilter("ignore")
        interpreter = tf.lite.Interpreter(model_content=content, num_threads=num_threads or usable_cpu_count())
    interpreter.allocate_tensors()
    return interpreter
