"""Exponential moving averages of a model's trainable weights (`--ema_decay=D`; `MovingAverages`,
a training hook).

After every optimizer step that changed the weights, each average moves towards its weight:
`average = D * average + (1 - D) * weight`. The averages start as the starting weights (after
loading and re-initialising; never on a resume) and are part of the training state, keyed by the
TF1 names under `averages/`, so a resumed run goes on with the averages it had. Evaluation during
training and the best checkpoint see the averages in place of the weights (`swapped_in`); once
training ends they replace the weights (`assign_to_model`), so `model.ckpt-N`, evaluation,
prediction and export all use them. The training itself always steps the raw weights.
"""

import contextlib

import keras
import tensorflow as tf

import modeling
from bert_realformer.training import recorded_options
from bert_realformer.training.hooks import HookRun, TrainingHook


class WeightAverages:
    """The averages of `model`'s trainable weights (create under the model's strategy scope).

    Args:
      model: a built Keras model with TF1 names (`modeling.weight_variables`: LoRA factors too).
      decay: D in [0, 1): the weight the average keeps at each step.
    """

    def __init__(self, model: keras.Model, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"an average's decay must be in (0, 1), not {decay}")
        self.decay = decay
        trainable = {id(v) for v in model.trainable_variables}
        self._weights = {name: v.value for name, v in modeling.weight_variables(model).items() if id(v) in trainable}
        first_replica = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.averages = {name: tf.Variable(weight, trainable=False, aggregation=first_replica,
                                           name="average_" + name.replace("/", "_"))
                         for name, weight in self._weights.items()}

    def _pairs(self):
        return [(self.averages[name], weight) for name, weight in self._weights.items()]

    def update(self, applied) -> None:
        """One step of every average (replica context; `applied`: a boolean scalar, False for
        a step that changed no weight, which leaves the averages as they were)."""
        keep = tf.constant(self.decay, tf.float32)
        for average, weight in self._pairs():
            moved = keep * average + (1.0 - keep) * tf.cast(weight, average.dtype)
            average.assign(tf.where(applied, moved, average))

    def reset(self) -> None:
        """Every average set to its weight (a new run, once its starting weights are loaded)."""
        for average, weight in self._pairs():
            average.assign(weight.read_value())

    def assign_to_model(self) -> None:
        """The model's weights replaced by their averages."""
        for average, weight in self._pairs():
            weight.assign(average.read_value())

    @contextlib.contextmanager
    def swapped_in(self):
        """Inside: the model holds the averages; afterwards its own weights again."""
        kept = [tf.identity(weight.read_value()) for _, weight in self._pairs()]
        self.assign_to_model()
        try:
            yield
        finally:
            for (_, weight), value in zip(self._pairs(), kept):
                weight.assign(value)


class MovingAverages(TrainingHook):
    """The hook that keeps `WeightAverages` of decay `decay` (0: none) through a run: in its
    training state (`averages/`), stepped after every applied update, started from the starting
    weights, swapped in for every evaluation, and put in the weights' place at the end. A
    resumed run keeps the decay it started with (`recorded_options.resumed_ema_decay`)."""

    def __init__(self, decay: float):
        self.wanted = decay
        self.decay = decay
        self.averages: WeightAverages | None = None

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict:
        self.decay, line = (recorded_options.resumed_ema_decay(run.write_dir, self.wanted) if run.resuming
                            else (self.wanted, None))
        run.say(*([line] if line else []))
        self.averages = WeightAverages(run.model, self.decay) if self.decay else None
        return {} if self.averages is None else {"averages": self.averages.averages}

    def after_update(self, run: HookRun, applied) -> None:
        if self.averages is not None:
            self.averages.update(applied)

    def recorded_options(self, run: HookRun) -> dict:
        return {"ema_decay": self.decay}

    def on_weights_set(self, run: HookRun) -> list[str]:
        if self.averages is not None and not run.resuming:
            self.averages.reset()
        return []

    def evaluation_context(self, run: HookRun):
        return None if self.averages is None else self.averages.swapped_in()

    def on_train_end(self, run: HookRun, step: int) -> list[str]:
        if self.averages is None:
            return []
        with run.strategy.scope():
            self.averages.assign_to_model()
        return [f"weights: their moving averages (decay {self.decay:g}) from here on"]
