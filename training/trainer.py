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


class TrainLoop:
    """Args:
      strategy: the tf.distribute strategy the model and optimizer were built under.
      model: a Keras model (built).
      optimizer: an `AdamWeightDecay`/`Lamb` from `training.optimization`.
      loss_fn: `loss_fn(model, features, training, step) -> (loss, {name: scalar})`, the loss a
        mean over the replica's micro-batch; `step` is the optimizer step (e.g. for PLD).
      global_batch_size: examples per micro-batch over all replicas.
      accumulation_steps: micro-batches per optimizer step.
      loss_scaling: dynamic loss scaling (fp16).
      use_xla: compile the replica computations with XLA.
    """

    def __init__(self, strategy, model, optimizer, loss_fn, accumulation_steps=1,
                 loss_scaling=False, use_xla=False, clip_norm=1.0):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
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
    def _gradients(self, features):
        step = self.optimizer.iterations
        with tf.GradientTape() as tape:
            loss, metrics = self.loss_fn(self.model, features, True, step)
            replicas = self.strategy.num_replicas_in_sync
            scaled = tf.cast(loss, tf.float32) / float(replicas * self.accumulation_steps)
            if self.loss_scaling:
                scaled = scaled * self.loss_scale
        grads = tape.gradient(scaled, self._variables)
        return [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
                for g, v in zip(grads, self._variables)], metrics

    def _accumulate(self, features):
        grads, metrics = self._gradients(features)
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
        grads, metrics = self._gradients(features)
        return metrics, self._apply(grads)

    def _apply_accumulated(self):
        grads = [a.read_value() for a in self._accumulators]
        norm = self._apply(grads)
        for accumulator in self._accumulators:
            accumulator.assign(tf.zeros_like(accumulator))
        return norm

    # ------------------------------------------------------------------ the step
    def _reduce_metrics(self, per_replica):
        return {name: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
                for name, value in per_replica.items()}

    def _build_train_step(self):
        strategy = self.strategy

        @tf.function
        def train_step(iterator):
            if self.accumulation_steps == 1:
                metrics, norm = strategy.run(self._single_step, args=(next(iterator),))
                metrics = self._reduce_metrics(metrics)
            else:
                totals = None
                for _ in range(self.accumulation_steps):  # unrolled: N is small
                    metrics = self._reduce_metrics(
                        strategy.run(self._accumulate, args=(next(iterator),)))
                    totals = metrics if totals is None else {k: totals[k] + metrics[k] for k in totals}
                metrics = {k: v / float(self.accumulation_steps) for k, v in totals.items()}
                norm = strategy.run(self._apply_accumulated)
            metrics["gradient_norm"] = strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
            metrics["loss_scale"] = tf.identity(self.loss_scale)
            return metrics

        return train_step

    def train_step(self, iterator):
        """One optimizer step. Returns {name: scalar tensor} (replica means)."""
        if self._train_step is None:
            self._train_step = self._build_train_step()
        return self._train_step(iterator)
