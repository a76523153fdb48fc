"""Prediction under a distribution strategy, each prediction function traced once per input
spec (`Predictor`): the training driver's `predict`."""

from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

PredictFn = Callable[[keras.Model, dict], dict]  # (model, features) -> {name: [B, ...] tensor}


class Predictor:
    """Runs `fn(model, features)` over every batch of a dataset under `strategy` (batches split
    across replicas; multi-worker runs predict on this worker alone) and gathers the outputs in
    the dataset's order. A step is traced once per (`fn`, the dataset's element spec): batches
    that differ in sequence length (dynamic padding, spec `[None, None]`) share one graph, and a
    later call with the same `fn` re-uses it, so a task passes the same function every call."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model):
        self.strategy = strategy
        self.model = model
        self._steps = {}  # (fn, repr of the input spec) -> its traced step

    @property
    def traces(self) -> int:
        """How many times the steps were traced."""
        return sum(step.experimental_get_tracing_count() for step in self._steps.values())

    def predict(self, dataset: tf.data.Dataset, fn: PredictFn) -> dict[str, np.ndarray]:
        """{name: numpy array [N, ...]} of `fn`'s outputs over `dataset`, in its order."""
        this_worker_only = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        batches = dataset if this_worker_only else self.strategy.experimental_distribute_dataset(dataset)
        key = (fn, repr(batches.element_spec))
        if key not in self._steps:
            self._steps[key] = self._step(fn, batches.element_spec, this_worker_only)
        step = self._steps[key]
        parts = {}
        for features in batches:
            for name, value in step(features).items():
                parts.setdefault(name, []).append(np.asarray(value))
        return {name: np.concatenate(values) for name, values in parts.items()}

    def _step(self, fn, spec, this_worker_only):
        strategy, model = self.strategy, self.model
        # (without AutoGraph: the model has no tensor-dependent Python control flow to convert)

        @tf.function(input_signature=[spec], autograph=False)
        def distributed_step(features):
            outputs = strategy.run(lambda f: fn(model, f), args=(features,))
            return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}

        @tf.function(input_signature=[spec], autograph=False)
        def this_worker_step(features):
            return fn(model, features)

        return this_worker_step if this_worker_only else distributed_step
