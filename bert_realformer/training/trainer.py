"""The optimizer step on a tf.distribute strategy, and N of them in one `tf.function` call.

One attempt takes `accumulation_steps` micro-batches from the (distributed) iterator (with
more than one, as one element: each replica's micro-batches stacked, `global_batch_slices`),
accumulates gradients of the step's loss over all of them in a loop (per replica, in local
variables; the step's graph holds `MICRO_BATCHES_AT_ONCE` forward and backward passes, however
many there are),
all-reduces across replicas, clips to global norm 1.0 (the original's `clip_by_global_norm` of
the global gradient), and applies the optimizer once. So N micro-batches of B give the update of
one batch of N*B, under every strategy. With fp16, dynamic loss scaling: an attempt whose
gradients are not finite changes no weight, slot or step counter and halves the scale (the
run still makes its number of real steps); 2000 finite steps in a row double it.

Divergence: an attempt whose loss or gradient norm is not finite (without loss scaling, or with
the scale at its floor of 1) changes nothing and ends the loop of steps at once, with
`diverged` set in its metrics; the driver stops the run there (no per-step host sync: the flag
is carried in the loop).

Randomness: each replica's micro-batch runs in `modeling.random_stream(step, stream)` with
`stream = micro-batch index * replicas + replica id`, so replicas, machines and micro-batches
draw their own dropout and PLD values, and the draws are a function of the step alone (a
resumed run draws what the uninterrupted one drew). `input_position` counts the global
micro-batches consumed, so that a resumed run can continue the input where it stopped.
"""

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import tensorflow as tf

from bert_realformer.cpus import on_cpus, without_autotuning
from bert_realformer.training.distribution import this_worker
from bert_realformer.training.optimization import global_norm_scale, squared_norms
from modeling.randomness import random_stream

INITIAL_LOSS_SCALE = 2.0 ** 15
LOSS_SCALE_GROWTH_INTERVAL = 2000
# Micro-batches an iteration of the accumulation loop: the step's graph holds this many forward
# and backward passes, whatever the number accumulated (N copies, unrolled, took N times the
# tracing and several times the memory), and two let one micro-batch's forward pass overlap the
# previous one's backward pass (one at a time made the step slower on a CPU).
MICRO_BATCHES_AT_ONCE = 2

class LossFn(Protocol):
    """This replica's and micro-batch's share of the step's loss, and metrics as shares too
    (the shares add up to the step's values; see `pretraining.losses`), from a forward pass in
    training mode. `step` is the optimizer step (for PLD); `totals` the step-wide sums of the
    `TotalsFn`."""

    def __call__(self, model, features: dict, step, totals: dict) -> tuple[Any, dict]: ...


class TotalsFn(Protocol):
    """{name: scalar} of one micro-batch's features, summed over every replica and
    micro-batch of a step before the loss is computed (e.g. the MLM weight sum)."""

    def __call__(self, features: dict) -> dict: ...


def distributed_input(strategy: tf.distribute.Strategy, dataset_fn: Callable[[], tf.data.Dataset],
                      global_batch_size: int, micro_batches: int = 1):
    """What the step loop reads (`iter` of it): the global batches `dataset_fn()` reads, each
    input pipeline keeping its slice (`global_batch_slices`). Where this worker's one replica is
    a CPU (one device; a worker of `multi_worker` on a CPU machine) this worker's pipeline
    itself; else the strategy's distributed dataset, whose iterator prefetches through
    per-device datasets that tune themselves: releasing it on a CPU waited up to a minute on
    their tuning thread (BENCHMARKS.md). On CPUs read with tf.data's autotuning off
    (`without_autotuning`)."""
    cpus_only = on_cpus(strategy)

    def pipeline(context):
        dataset = global_batch_slices(dataset_fn(), global_batch_size, context, micro_batches)
        return without_autotuning(dataset) if cpus_only else dataset

    if cpus_only and len(strategy.extended.worker_devices) == 1:
        workers, index = this_worker(strategy)
        return pipeline(tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=index,
                                                   num_replicas_in_sync=strategy.num_replicas_in_sync))
    return strategy.distribute_datasets_from_function(pipeline)


def global_batch_slices(dataset, global_batch_size, context, micro_batches=1):
    """For `strategy.distribute_datasets_from_function`: every input pipeline (worker) reads
    the same sequence of global batches and keeps its own slice, cut into per-replica batches.
    So each step trains on the same examples under any strategy and number of machines (the
    pipelines must read deterministically: same files, same seed). `micro_batches` > 1 (gradient
    accumulation): each element holds a replica's micro-batches of one step, stacked
    (`stacked_micro_batches`)."""
    pipelines, index = context.num_input_pipelines, context.input_pipeline_id
    if global_batch_size % context.num_replicas_in_sync:
        raise ValueError(f"batch size {global_batch_size} is not divisible by "
                         f"{context.num_replicas_in_sync} replicas")
    per_pipeline = global_batch_size // pipelines
    if pipelines > 1:
        dataset = dataset.map(lambda batch: {k: v[index * per_pipeline:(index + 1) * per_pipeline]
                                             for k, v in batch.items()})
    per_replica = context.get_per_replica_batch_size(global_batch_size)
    if per_replica != per_pipeline:
        dataset = dataset.rebatch(per_replica)
    if micro_batches > 1:
        dataset = stacked_micro_batches(dataset, micro_batches, context.num_replicas_in_sync // pipelines)
    return dataset


def stacked_micro_batches(dataset, micro_batches, replicas):
    """Per-replica batches {name: [b, ...]}, the pipeline's `replicas` taking them in turn ->
    (stacked {name: [micro_batches, b, ...]}, sizes {name: [micro_batches, rank]}): each
    replica's micro-batches of one step, the replicas still in turn. Micro-batches of other
    shapes (dynamic padding, documents of several windows) are stacked padded with zeros;
    `sizes` holds each one's own shape of every feature whose shape varies (unknown in the
    dataset's spec), for `micro_batch` to cut it back. A last, partial step is dropped."""
    varying = [name for name, spec in dataset.element_spec.items() if not spec.shape.is_fully_defined()]
    with_sizes = dataset.map(lambda features: (features, {name: tf.shape(features[name]) for name in varying}))
    grouped = with_sizes.padded_batch(micro_batches * replicas, drop_remainder=True)

    def per_replica(value):  # [micro_batches * replicas, ...] -> [replicas, micro_batches, ...]
        value = tf.reshape(value, tf.concat([[micro_batches, replicas], tf.shape(value)[1:]], 0))
        return tf.transpose(value, [1, 0, *range(2, value.shape.rank)])
    return grouped.map(lambda *element: tf.nest.map_structure(per_replica, element)).unbatch()


def micro_batch(stacked, sizes, index):
    """Micro-batch `index` (a scalar tensor) of a replica's `stacked_micro_batches`, each feature
    of a varying shape cut back to its own: {name: [b, ...]}, as the input pipeline made it."""
    return {name: tf.slice(value[index], tf.zeros_like(sizes[name][index]), sizes[name][index])
            if name in sizes else value[index] for name, value in stacked.items()}


def replica_stream(micro_index=0):
    """In a replica context: the random stream of this replica's `micro_index`-th micro-batch,
    `micro_index * replicas + replica id` (global over machines). The pieces of a global batch
    are numbered in batch order either way, so one device accumulating N micro-batches and N
    replicas draw the same per-example values."""
    context = tf.distribute.get_replica_context()
    replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
    return micro_index * context.num_replicas_in_sync + replica


class TrainLoop:
    """Args:
      strategy: the tf.distribute strategy the model was built under.
      model: a Keras model (built).
      optimizer: an `AdamWeightDecay`/`Lamb` from `training.optimization`.
      loss_fn: `loss_fn(model, features, step, totals) -> (loss, {name: scalar})` (`LossFn`).
      totals_fn: `totals_fn(features) -> {name: scalar}` (`TotalsFn`).
      metric_names: the keys of `loss_fn`'s metrics.
      accumulation_steps: micro-batches per optimizer step.
      loss_scaling: dynamic loss scaling (fp16).
      use_xla: compile the replica's forward and backward pass with XLA.
      after_update: functions of one boolean scalar (whether the update was applied) called in
        replica context after each optimizer step (the hooks' `after_update`: weight averages).
    """

    def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, loss_fn: LossFn,
                 totals_fn: TotalsFn, metric_names: Sequence[str] = ("loss",),
                 accumulation_steps: int = 1, loss_scaling: bool = False, use_xla: bool = False,
                 clip_norm: float = 1.0, after_update: Sequence[Callable] = ()):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.totals_fn = totals_fn
        self.metric_names = tuple(metric_names)
        self.accumulation_steps = accumulation_steps
        self.loss_scaling = loss_scaling
        self.clip_norm = clip_norm
        self.after_update = tuple(after_update)
        self._variables = [v.value for v in model.trainable_variables]
        with strategy.scope():
            optimizer.build(model.trainable_variables)
            self._accumulators = [
                tf.Variable(tf.zeros_like(v), trainable=False,
                            synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM, name="accumulated_gradient")
                for v in self._variables] if accumulation_steps > 1 else []
            first_replica = tf.VariableAggregation.ONLY_FIRST_REPLICA
            self.loss_scale = tf.Variable(INITIAL_LOSS_SCALE if loss_scaling else 1.0,
                                          trainable=False, dtype=tf.float32, name="loss_scale",
                                          aggregation=first_replica)
            self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64, name="good_steps",
                                          aggregation=first_replica)
            self.input_position = tf.Variable(0, trainable=False, dtype=tf.int64,
                                               name="input_position", aggregation=first_replica)
        self._compute = (tf.function(self._gradients, jit_compile=True, autograph=False) if use_xla
                         else self._gradients)
        self._run_steps = None

    def state(self):
        """The loop's variables a training state must hold besides model and optimizer."""
        return {"loss_scale": self.loss_scale, "good_steps": self.good_steps,
                "input_position": self.input_position}

    # ------------------------------------------------------------------ replica functions
    def _totals(self, features):
        """Sums of `totals_fn` over these features and all replicas."""
        context = tf.distribute.get_replica_context()
        return {k: context.all_reduce(tf.distribute.ReduceOp.SUM, v) for k, v in self.totals_fn(features).items()}

    def _stacked_totals(self, stacked):
        """`_totals` of a replica's stacked micro-batches {name: [N, b, ...]}, as one batch of
        N * b (the totals are sums over examples, and padding adds nothing to them)."""
        return self._totals(tf.nest.map_structure(
            lambda value: tf.reshape(value, tf.concat([[-1], tf.shape(value)[2:]], 0)), stacked))

    def _gradients(self, features, totals, stream):
        """(gradients, None where a variable got none; this share's metrics)."""
        step = self.optimizer.iterations
        with random_stream(step, stream), tf.GradientTape() as tape:
            loss, metrics = self.loss_fn(self.model, features, step, totals)
            scaled = tf.cast(loss, tf.float32)
            if self.loss_scaling:
                scaled = scaled * self.loss_scale
        grads = tape.gradient(scaled, self._variables)
        metrics = {name: tf.cast(metrics[name], tf.float32) for name in self.metric_names}
        return [None if g is None else tf.convert_to_tensor(g) for g in grads], metrics

    def _apply(self, grads):
        """All-reduce, unscale, clip, apply (replica context). Returns the global norm. A
        gradient that is not finite changes nothing (no weight, slot or step counter)."""
        context = tf.distribute.get_replica_context()
        if context.num_replicas_in_sync > 1:  # (one replica: a copy of every gradient saved)
            present = [i for i, g in enumerate(grads) if g is not None]
            reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
            grads = list(grads)
            for i, g in zip(present, reduced):
                grads[i] = g
        squares = squared_norms(grads)
        if self.loss_scaling:  # the squares of the scaled gradients are finite iff they are
            squares = [None if s is None else s / tf.square(self.loss_scale) for s in squares]
            finite = tf.reduce_all([tf.math.is_finite(s) for s in squares if s is not None])
        scale, norm = global_norm_scale(squares, self.clip_norm)
        if self.loss_scaling:
            scale = scale / self.loss_scale
        else:
            finite = tf.math.is_finite(norm)
        # An all-zero gradient (a layer Progressive Layer Dropping skipped) updates nothing.
        has_gradient = [None if s is None else s > 0 for s in squares]
        self.optimizer.apply(grads, self._variables, scale=scale, has_gradient=has_gradient, apply_mask=finite)
        for call in self.after_update:
            call(finite)
        if self.loss_scaling:
            self._update_loss_scale(finite)
        return norm

    def _update_loss_scale(self, finite):
        grow = tf.logical_and(finite, self.good_steps + 1 >= LOSS_SCALE_GROWTH_INTERVAL)
        new_scale = tf.where(finite, tf.where(grow, self.loss_scale * 2.0, self.loss_scale),
                             tf.maximum(self.loss_scale / 2.0, 1.0))
        self.loss_scale.assign(new_scale)
        self.good_steps.assign(tf.where(finite, tf.where(grow, tf.zeros_like(self.good_steps),
                                                          self.good_steps + 1),
                                        tf.zeros_like(self.good_steps)))

    def _accumulated_step(self, stacked, sizes):
        """A replica's step on its `stacked_micro_batches`: their gradients added up in a graph
        loop, `MICRO_BATCHES_AT_ONCE` micro-batches an iteration, then applied; returns (the
        micro-batches' metrics summed, the global norm)."""
        totals = self._stacked_totals(stacked)

        def add(index, metrics):
            """Micro-batch `index`'s gradients added to the accumulators; `metrics` plus its own."""
            grads, part = self._compute(micro_batch(stacked, sizes, index), totals, replica_stream(index))
            for accumulator, g in zip(self._accumulators, grads):
                if g is not None:
                    accumulator.assign_add(g)
            # (a sum of a stack, not a chain of adds: in a loop, grappler's rewrite of add chains
            # makes a temporary that clashes between iterations)
            return {name: tf.reduce_sum(tf.stack([metrics[name], part[name]])) for name in metrics}

        at_once = min(MICRO_BATCHES_AT_ONCE, self.accumulation_steps)
        in_loop = self.accumulation_steps - self.accumulation_steps % at_once

        def next_ones(index, metrics):
            for k in range(at_once):
                metrics = add(index + k, metrics)
            return index + at_once, metrics
        start = (tf.constant(0, tf.int64), {name: tf.zeros((), tf.float32) for name in self.metric_names})
        index, metrics = tf.while_loop(lambda index, _: index < in_loop, next_ones, start, parallel_iterations=1)
        for k in range(self.accumulation_steps - in_loop):  # (the one left over from pairs)
            metrics = add(index + k, metrics)
        norm = self._apply([accumulator.read_value() for accumulator in self._accumulators])
        for accumulator in self._accumulators:
            accumulator.assign(tf.zeros_like(accumulator))
        return metrics, norm

    def _single_step(self, features):
        grads, metrics = self._compute(features, self._totals(features), replica_stream(0))
        return metrics, self._apply(grads)

    # ------------------------------------------------------------------ the steps
    def _reduce_metrics(self, per_replica):
        return {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                for name, value in per_replica.items()}

    def _attempt(self, iterator):
        """One optimizer step (or, with fp16, an attempt that an overflow may skip)."""
        return self.attempt_on(next(iterator))

    def attempt_on(self, batch):
        """`_attempt` on one (distributed) element already read: a micro-batch, or with
        accumulation each replica's `accumulation_steps` micro-batches, stacked, and their sizes
        (`stacked_micro_batches`). The device-side part of a step, which holds no host-only op
        and compiles with XLA whole (what a TPU needs, whose shapes are all fixed;
        `tests/test_trainer.py` compiles it with `jit_compile=True`)."""
        strategy = self.strategy
        scale_before = tf.identity(self.loss_scale)
        if self.accumulation_steps == 1:
            metrics, norm = strategy.run(self._single_step, args=(batch,))
        else:
            metrics, norm = strategy.run(self._accumulated_step, args=batch)
        metrics = self._reduce_metrics(metrics)
        self.input_position.assign_add(self.accumulation_steps)
        metrics["gradient_norm"] = strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
        metrics["diverged"] = self._diverged(metrics, scale_before)
        metrics["loss_scale"] = tf.identity(self.loss_scale)
        return metrics

    def _diverged(self, metrics, loss_scale):
        """Whether this attempt's loss or gradient norm is not finite in a way training cannot
        recover from: always without loss scaling; with it, only once the scale (`loss_scale`,
        before the attempt) is at its floor of 1 (above it, the attempt is a skipped step)."""
        finite = tf.math.is_finite(metrics["gradient_norm"])
        if "loss" in metrics:
            finite = tf.logical_and(finite, tf.math.is_finite(metrics["loss"]))
        if self.loss_scaling:
            return tf.logical_and(tf.logical_not(finite), loss_scale <= 1.0)
        return tf.logical_not(finite)

    def _build_run_steps(self):
        names = (*self.metric_names, "gradient_norm", "loss_scale")

        @tf.function
        def run_steps(iterator, attempts):
            metrics = {name: tf.zeros((), tf.float32) for name in names}
            metrics["diverged"] = tf.constant(False)
            loss_sum = tf.zeros((), tf.float32)
            # AutoGraph converts this loop alone: the step holds no tensor-dependent Python
            # control flow, and converting the model and optimizer code too costs a third of
            # the tracing time.
            attempt = tf.autograph.experimental.do_not_convert(self._attempt)
            for _ in tf.range(attempts):
                metrics = attempt(iterator)
                if metrics["diverged"]:
                    break
                if "loss" in metrics:
                    loss_sum += metrics["loss"]
            return {**metrics, "loss_sum": loss_sum}

        return run_steps

    def run_steps(self, iterator, attempts):
        """`attempts` optimizer steps in one `tf.function` call, with no host round trip
        between them (the original's `iterations_per_loop`). Returns {name: scalar tensor}:
        the loss metrics of the last step's whole batch, `gradient_norm`, `loss_scale`,
        `loss_sum` (the sum of the losses of the loop's steps: their mean, for the driver's stuck
        check), and `diverged`: True when the loop stopped early at an attempt whose loss or
        gradient is not finite (see `_diverged`); that attempt changed no weight and no step
        counter."""
        if self._run_steps is None:
            self._run_steps = self._build_run_steps()
        return self._run_steps(iterator, tf.constant(attempts, tf.int64))

    def train_step(self, iterator):
        """One optimizer step (see `run_steps`)."""
        return self.run_steps(iterator, 1)
