"""A training option written as a hook outside the package, as docs/adding-a-training-option.md
shows: stop training once the loss has not improved for `patience` loops of steps.

It keeps the lowest mean loss of a loop so far in the training state (so a resumed run goes on
with it), says its own line when it stops the run, and records its patience in the run's
training_options.json.
"""

import tensorflow as tf

from bert_realformer.training.hooks import HookRun, TrainingHook


class PlateauStop(TrainingHook):
    """Asks the driver to stop once `patience` loops of steps in a row brought no lower mean loss."""

    def __init__(self, patience: int):
        self.patience = patience
        self.best = self.waited = None

    def state_variables(self, run: HookRun, resumed_from):
        # (built under the strategy's scope; saved and restored with the training state)
        self.best = tf.Variable(float("inf"), trainable=False, dtype=tf.float64, name="best_loss")
        self.waited = tf.Variable(0, trainable=False, dtype=tf.int64, name="loops_without_a_better_loss")
        return {"plateau_best": self.best, "plateau_waited": self.waited}

    def recorded_options(self, run: HookRun) -> dict:
        return {"plateau_patience": self.patience}

    def after_steps(self, run: HookRun, previous: int, step: int, metrics: dict) -> None:
        mean = metrics["loss_sum"] / (step - previous)
        if mean < self.best.numpy():
            self.best.assign(mean)
            self.waited.assign(0)
        else:
            self.waited.assign_add(1)

    def stop_reason(self, run: HookRun, step: int):
        if self.waited.numpy() < self.patience:
            return None
        return (f"plateau at step {step}: no lower loss in {int(self.waited.numpy())} loops (best "
                f"{self.best.numpy():.4f})")
