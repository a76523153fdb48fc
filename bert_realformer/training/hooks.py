"""Training hooks: how an option takes part in a training run without the driver knowing it, in
the spirit of Keras callbacks and transformers' `TrainerCallback`.

    class PrintLoss(TrainingHook):
        def after_steps(self, run, previous, step, metrics):
            run.say(f"loss at step {step}: {float(metrics['loss']):.4f}")

    driver.train(task, hooks=[PrintLoss()])

`Driver.train` calls every hook at each point below, in the order the hooks were given; a hook
overrides only what it needs (the rest are no-ops here). The run it is handed (`HookRun`) is what
hooks may read and use: the driver's model and options, the task, whether the run resumes, and a
few services (`say`, `evaluating`, `report_evaluation`).

  building the run (under the strategy's scope, before any step):
    wrap_loss(run, loss_fn)            -> the loss the step trains on (adversarial training)
    learning_rate_multipliers(run)     -> one factor per trainable variable (layer-wise rates)
    state_variables(run, resumed_from) -> {name: trackable} added to the training state (saved,
                                          restored on resume: weight averages, the stuck check)
    after_update(run, applied)         in the step's graph, on every replica, after the optimizer
                                       applied an update (`applied`: a boolean scalar tensor)
    recorded_options(run)              -> what a new run records in training_options.json
  the run:
    on_weights_set(run)                -> lines to say, once the weights are resumed or set
    on_train_begin(run)                once the run is set to go (its options recorded, the
                                       workers agreed), before the first step
    next_boundary(run, step)           -> a step a loop of steps must end at (or None)
    after_steps(run, previous, step, metrics)  after each loop of steps, before a save
    before_save(run, step), after_save(run, step)
    at_step(run, step)                 at the start and after each loop (after a save):
                                       evaluations, verdicts; may raise to end the run
    evaluation_context(run)            -> a context an evaluation runs in (weight averages swapped in)
    on_evaluation(run, step, result, classes) -> whether this is the best evaluation so far
    stop_reason(run, step)             -> why training should stop now (early stopping), or None
    on_train_end(run, step)            -> lines to say, after the last step (before model.ckpt-N)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    import keras
    import numpy as np
    import tensorflow as tf


class TrainingHook:
    """A training option's part in a run; see the module docstring for when each method is called."""

    def wrap_loss(self, run: HookRun, loss_fn):
        return loss_fn

    def learning_rate_multipliers(self, run: HookRun) -> list[float] | None:
        return None

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict[str, Any]:
        return {}

    def after_update(self, run: HookRun, applied: tf.Tensor) -> None:
        return None

    def recorded_options(self, run: HookRun) -> dict:
        return {}

    def on_weights_set(self, run: HookRun) -> list[str]:
        return []

    def on_train_begin(self, run: HookRun) -> None:
        return None

    def next_boundary(self, run: HookRun, step: int) -> int | None:
        return None

    def after_steps(self, run: HookRun, previous: int, step: int, metrics: dict) -> None:
        return None

    def before_save(self, run: HookRun, step: int) -> None:
        return None

    def after_save(self, run: HookRun, step: int) -> None:
        return None

    def at_step(self, run: HookRun, step: int) -> None:
        return None

    def evaluation_context(self, run: HookRun) -> contextlib.AbstractContextManager | None:
        return None

    def on_evaluation(self, run: HookRun, step: int, result: dict, classes: np.ndarray | None) -> bool:
        return False

    def stop_reason(self, run: HookRun, step: int) -> str | None:
        return None

    def on_train_end(self, run: HookRun, step: int) -> list[str]:
        return []


@dataclasses.dataclass
class HookRun:
    """What the hooks of one `Driver.train` call see.

    driver: the `training.driver.Driver`; task: its `TrainingTask`. resuming: the run goes on
      from its own training state (else it starts: fresh weights or `--init_checkpoint`'s).
      bias_correction: the AdamW bias correction the run trains with (as it started, for a resumed
      run). first_step: the step training starts (or resumes) at.
    """
    driver: Any
    task: Any
    hooks: Sequence[TrainingHook]
    resuming: bool
    bias_correction: bool
    first_step: int = 0
    latest_saved_step: Callable[[], int | None] = lambda: None

    @property
    def model(self) -> keras.Model:
        return self.driver.model

    @property
    def strategy(self) -> tf.distribute.Strategy:
        return self.driver.strategy

    @property
    def options(self):  # (the driver's `RunOptions`)
        return self.driver.options

    @property
    def write_dir(self) -> str:
        return self.driver.write_dir

    @property
    def output_dir(self) -> str:
        return self.driver.options.output_dir

    @property
    def is_chief(self) -> bool:
        return self.driver.options.is_chief

    def say(self, *lines: str) -> None:
        """Lines for the user, on the driver's stream."""
        self.driver.say(*lines)

    @contextlib.contextmanager
    def evaluating(self):
        """The context every hook asks an evaluation to run in (`evaluation_context`)."""
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                context = hook.evaluation_context(self)
                if context is not None:
                    stack.enter_context(context)
            yield

    def report_evaluation(self, step: int, result: dict, classes: np.ndarray | None = None) -> bool:
        """Hands an evaluation to every hook (`on_evaluation`); whether one found it the best so far."""
        best = False
        for hook in self.hooks:
            best = hook.on_evaluation(self, step, result, classes) or best
        return best
