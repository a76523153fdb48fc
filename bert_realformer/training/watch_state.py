"""The stuck check's windows (`training.stuck.StuckWatch.state`) held in the training state, so
that a fine-tuning run killed and resumed finds a stuck run at the step the uninterrupted run
does (and `--on_stuck=restart` restarts it there).

The driver builds `WatchVariables` under the strategy, puts it in the training state as
`stuck_watch`, copies the watch into it before each save (`before_save`) and back after a resume
(`after_restore`). A training state written before the watch was kept has no `stuck_watch`: a run
resumed from one leaves it out and its windows start again from the resumed step.
"""

from __future__ import annotations

import tensorflow as tf

from bert_realformer import checkpoints
from bert_realformer.training.stuck import StuckWatch


class WatchVariables(tf.Module):
    """One float64 scalar per number of `watch.state()` (the same on every replica: the losses
    are, and only the chief uses the rest)."""

    NAME = "stuck_watch"  # its key in the training state

    def __init__(self, watch: StuckWatch):
        super().__init__(name=self.NAME)
        self.watch = watch
        self.numbers = {name: tf.Variable(value, trainable=False, dtype=tf.float64, name=name,
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                        for name, value in watch.state().items()}

    def before_save(self) -> None:
        for name, value in self.watch.state().items():
            self.numbers[name].assign(value)

    def after_restore(self) -> None:
        self.watch.resume({name: float(variable.numpy()) for name, variable in self.numbers.items()})

    @classmethod
    def for_training_state(cls, watch: StuckWatch | None, resumed_from: str | None) -> WatchVariables | None:
        """The watch's variables for a training state (build them under the strategy's scope);
        None without a watch, or when resuming from a training state `resumed_from` that has none."""
        if watch is None:
            return None
        keys = checkpoints.checkpoint_keys(resumed_from) if resumed_from is not None else [cls.NAME + "/"]
        return cls(watch) if any(key.startswith(cls.NAME + "/") for key in keys) else None
