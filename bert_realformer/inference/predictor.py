"""Prediction, each prediction function traced once per input spec (`Predictor`): the training
driver's `predict`.

On one device the model runs in a function of its own, outside the distribution strategy (whose
step only adds work there: measurably slower prediction on a CPU), as the prediction engine
(`inference.engines`: the graph, XLA, int8, TensorFlow Lite) runs it. Under several replicas
the batches are split across them and the engine's kernels traced into the strategy's step; an
engine for one device alone (XLA) gives way to the graph there. On CPUs the batches are read
with tf.data's autotuning off.
"""

import logging

import keras
import numpy as np
import tensorflow as tf

from bert_realformer.cpus import on_cpus, without_autotuning
from bert_realformer.inference.engines import GraphEngine, PredictFn, make_engine, traced_within

logger = logging.getLogger(__name__)


def _single_device(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.OneDeviceStrategy) or not tf.distribute.has_strategy() and \
        strategy is tf.distribute.get_strategy()


class Predictor:
    """Runs `fn(model, features)` over every batch of a dataset and gathers the outputs in the
    dataset's order: on one device (or this host's CPUs) as the engine `engine` runs it, under
    several replicas with the batches split across them (multi-worker runs predict on this
    worker alone). A step is traced once per (`fn`, the dataset's element spec): batches that
    differ in sequence length (dynamic padding, spec `[None, None]`) share one graph, and a
    later call with the same `fn` re-uses it, so a task passes the same function every call.
    `cpu_kernels=False` leaves this project's CPU kernels out (the same outputs to 1e-6)."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, engine: str = "graph",
                 cpu_kernels: bool = True):
        self.strategy = strategy
        self.model = model
        self.single_device = _single_device(strategy)
        self._cpus_only = on_cpus(strategy)
        self.engine: GraphEngine = make_engine(engine, model, cpu_kernels and self._cpus_only)
        if self.engine.one_device_only and not self.single_device:
            logger.warning("prediction by %s runs on one device only; with %d replicas it runs the distribution "
                           "strategy's graph", engine, strategy.num_replicas_in_sync)
            self.engine = make_engine("graph", model, cpu_kernels and self._cpus_only)
        # What the tasks map over their batches of dynamic padding (the length buckets when compiled).
        self.trim = self.engine.trim
        self._steps = {}  # (fn, repr of the input spec) -> its traced step

    @property
    def traces(self) -> int:
        """How many times the steps were traced."""
        return sum(step.experimental_get_tracing_count() for step in self._steps.values()
                   if isinstance(step, tf.types.experimental.PolymorphicFunction))

    def predict(self, dataset: tf.data.Dataset, fn: PredictFn) -> dict[str, np.ndarray]:
        """{name: numpy array [N, ...]} of `fn`'s outputs over `dataset`, in its order."""
        if self._cpus_only:
            dataset = without_autotuning(dataset)
        self.engine.refresh()
        this_worker_only = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        if self.engine.on_host or self.single_device or this_worker_only:
            key = (fn, repr(dataset.element_spec))
            if key not in self._steps:
                self._steps[key] = self.engine.step(fn, dataset.element_spec)
            return _gathered(self.engine.outputs(self._steps[key], dataset))
        batches = self.strategy.experimental_distribute_dataset(dataset)
        key = (fn, repr(batches.element_spec))
        if key not in self._steps:
            self._steps[key] = self._distributed_step(fn, batches.element_spec)
        return _gathered(map(self._steps[key], batches))

    def _distributed_step(self, fn, spec):
        strategy, model, fn = self.strategy, self.model, traced_within(self.engine.within(), fn)

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
