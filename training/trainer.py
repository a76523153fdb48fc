"""A custom training loop on a tf.distribute strategy, shared by the scripts.

One call of `TrainLoop.train_step(iterator)` is one optimizer step: it takes
`accumulation_steps` micro-batches from the (distributed) iterator, accumulates gradients of the
mean loss over all of them (per replica, in local variables), all-reduces across replicas,
clips to global norm 1.0 (the original's `clip_by_global_norm` of the global gradient), and
applies the optimizer once. So N micro-batches of B give the update of one batch of N*B, under
every strategy. With fp16, dynamic loss scaling: a step whose gradients are not finite changes
no weight or slot, halves the scale; 2000 finite steps in a row double it.
"""

import tensorflow as tf

from training.optimization import clip_by_global_norm

INITIAL_LOSS_SCALE = 2.0 ** 15
LOSS_SCALE_GROWTH_INTERVAL = 2000


def global_batch_slices(dataset, global_batch_size, context):
    """For `strategy.distribute_datasets_from_function`: every input pipeline (worker) reads
    the same sequence of global batches and keeps its own slice, cut into per-replica batches.
    So each step trains on the same examples under any strategy and number of machines (the
    pipelines must read deterministically: same files, same seed)."""
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
    return dataset


class TrainLoop:
    """Args:
      strategy: the tf.distribute strategy the model and optimizer were built under.
      model: a Keras model (built).
      optimizer: an `AdamWeightDecay`/`Lamb` from `training.optimization`.
      loss_fn: `loss_fn(model, features, training, step, totals) -> (loss, {name: scalar})`:
        this replica's and micro-batch's share of the step's loss, and metrics as shares too
        (the shares add up to the step's values; see `pretraining.losses`). `step` is the
        optimizer step (for PLD); `totals` the step-wide sums of `totals_fn`.
      totals_fn: `totals_fn(features) -> {name: scalar}`, summed over every replica and
        micro-batch of a step before the loss is computed (e.g. the MLM weight sum).
      accumulation_steps: micro-batches per optimizer step.
      loss_scaling: dynamic loss scaling (fp16).
      use_xla: compile the replica computations with XLA.
    """

    def __init__(self, strategy, model, optimizer, loss_fn, totals_fn, accumulation_steps=1,
                 loss_scaling=False, use_xla=False, clip_norm=1.0):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.totals_fn = totals_fn
        self.accumulation_steps = accumulation_steps
        self.loss_scaling = loss_scaling
        self.use_xla = use_xla
        self.clip_norm = clip_norm
        optimizer.gradients_are_reduced = True
        variables = [v.value for v in model.trainable_variables]
        self._variables = variables
        with strategy.scope():
            optimizer.build(model.trainable_variables)
            self._accumulators = [
                tf.Variable(tf.zeros_like(v), trainable=False,
                            synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM, name="accumulated_gradient")
                for v in variables] if accumulation_steps > 1 else []
            self.loss_scale = tf.Variable(INITIAL_LOSS_SCALE if loss_scaling else 1.0,
                                          trainable=False, dtype=tf.float32, name="loss_scale",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64, name="good_steps",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self._train_step = None
        if use_xla:  # the forward and backward pass; the optimizer update stays outside XLA
            self._gradients = tf.function(self._gradients, jit_compile=True)

    # ------------------------------------------------------------------ replica functions
    def _totals(self, *micro_batches):
        """Sums of `totals_fn` over these micro-batches and all replicas."""
        totals = None
        for features in micro_batches:
            part = self.totals_fn(features)
            totals = part if totals is None else {k: totals[k] + part[k] for k in totals}
        context = tf.distribute.get_replica_context()
        return {k: context.all_reduce(tf.distribute.ReduceOp.SUM, v) for k, v in totals.items()}

    def _gradients(self, features, totals):
        step = self.optimizer.iterations
        with tf.GradientTape() as tape:
            loss, metrics = self.loss_fn(self.model, features, True, step, totals)
            scaled = tf.cast(loss, tf.float32)
            if self.loss_scaling:
                scaled = scaled * self.loss_scale
        grads = tape.gradient(scaled, self._variables)
        return [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
                for g, v in zip(grads, self._variables)], metrics

    def _accumulate(self, features, totals):
        grads, metrics = self._gradients(features, totals)
        for accumulator, g in zip(self._accumulators, grads):
            accumulator.assign_add(g)
        return metrics

    def _apply(self, grads):
        """All-reduce, unscale, clip, apply (replica context). Returns the global norm."""
        context = tf.distribute.get_replica_context()
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        finite = None
        if self.loss_scaling:
            grads = [g / self.loss_scale for g in grads]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        clipped, norm = clip_by_global_norm(grads, self.clip_norm)
        self.optimizer.apply_mask = finite
        self.optimizer.apply_gradients(zip(clipped, self._variables))
        self.optimizer.apply_mask = None
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

    def _single_step(self, features):
        grads, metrics = self._gradients(features, self._totals(features))
        return metrics, self._apply(grads)

    def _apply_accumulated(self):
        grads = [a.read_value() for a in self._accumulators]
        norm = self._apply(grads)
        for accumulator in self._accumulators:
            accumulator.assign(tf.zeros_like(accumulator))
        return norm

    # ------------------------------------------------------------------ the step
    def _reduce_metrics(self, per_replica):
        return {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                for name, value in per_replica.items()}

    def _build_train_step(self):
        strategy = self.strategy

        @tf.function
        def train_step(iterator):
            if self.accumulation_steps == 1:
                metrics, norm = strategy.run(self._single_step, args=(next(iterator),))
                metrics = self._reduce_metrics(metrics)
            else:
                micro_batches = [next(iterator) for _ in range(self.accumulation_steps)]
                totals = strategy.run(self._totals, args=tuple(micro_batches))
                metrics = None
                for features in micro_batches:  # unrolled: N is small
                    part = self._reduce_metrics(strategy.run(self._accumulate, args=(features, totals)))
                    metrics = part if metrics is None else {k: metrics[k] + part[k] for k in metrics}
                norm = strategy.run(self._apply_accumulated)
            metrics["gradient_norm"] = strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
            metrics["loss_scale"] = tf.identity(self.loss_scale)
            return metrics

        return train_step

    def train_step(self, iterator):
        """One optimizer step. Returns {name: scalar tensor}: the loss metrics of the step's
        whole batch, `gradient_norm`, `loss_scale`."""
        if self._train_step is None:
            self._train_step = self._build_train_step()
        return self._train_step(iterator)
