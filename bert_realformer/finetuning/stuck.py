"""Seeing that a fine-tuning run is stuck: it has learned nothing and will not.

A classifier of K classes that has learned nothing predicts about 1/K for every class, and its
training loss is ln K (0.6931 for two classes). Some seeds of a fine-tuning run stay there for
the whole run (Mosbach et al. 2021, "On the Stability of Fine-tuning BERT"; Devlin et al. restarted
such runs by hand). Two signs, after warm-up:

* the mean training loss has stayed within `TOLERANCE` (1%) of ln K over consecutive windows of
  steps, each `window` steps long (a tenth of the run, at least 10 steps), the first starting
  after warm-up, that cover `STUCK_FRACTION` (40%) of the steps after warm-up (at least
  `STUCK_WINDOWS` windows);
* every evaluation over as many steps (at least two evaluations) gave every example one class.

Runs that learn can sit at ln K for a while after warm-up before they leave it (a small model
from scratch for a third of its run); the 40% keeps those from being called stuck, and still
finds a stuck run by half of its steps. Some leave it later still (a small model fine-tuned from
a barely pretrained one): after a loss verdict that did not restart the run, the watch goes on
with its windows, and the first one whose mean lies below the band says that the run has left
chance after all (`left_chance()`), so that its numbers are not taken for a stuck model's.

The driver ends its loops of steps at window boundaries (`next_boundary`), hands the watch the
sum of each loop's step losses (`observe_loss`), and asks `verdict()` after each loop; the
fine-tuning evaluation hands it its predictions (`observe_predictions`). Either sign restarts a
run of one worker (`--on_stuck=restart`); a multi-worker run restarts on the loss sign alone (the
losses are the same on every worker, the predictions only the chief sees) and says so.

A training state holds the watch's `state()` (`finetuning.watch_state`): a run killed and resumed
goes on with the windows it had and finds what the uninterrupted run finds, at the same step. (The
streak of one-class evaluations is kept as of the state's save: an evaluation at the saved step
itself comes after the save.)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

TOLERANCE = 0.01      # relative distance from ln K that counts as "learned nothing"
STUCK_FRACTION = 0.4  # of the steps after warm-up, at ln K, that make a run stuck
STUCK_WINDOWS = 2     # consecutive windows at ln K, at least
MIN_WINDOW = 10       # steps


@dataclasses.dataclass
class Verdict:
    """What the watch saw: `reason` for the user; `from_loss`: the training-loss sign (the same
    on every worker, so it may restart a run of several)."""
    reason: str
    step: int
    from_loss: bool


class StuckWatch:
    """Args:
      num_classes: K (the choices, for multiple choice): chance loss ln K. None or < 2: no
        loss sign (a regression).
      num_warmup_steps, num_train_steps: the run's schedule.
      chance_loss: the training loss of a model that has learned nothing when it is not ln K
        (another loss than cross-entropy, e.g. focal loss).
    """

    def __init__(self, num_classes: int | None, num_warmup_steps: int, num_train_steps: int,
                 chance_loss: float | None = None):
        self._chance_text = None if chance_loss is None else f"{chance_loss:.4f}"
        if chance_loss is None and num_classes and num_classes >= 2:
            chance_loss = math.log(num_classes)
            self._chance_text = f"ln {num_classes} = {chance_loss:.4f}"
        self.chance_loss = chance_loss
        self.num_warmup_steps = num_warmup_steps
        self.num_train_steps = num_train_steps
        self.window = max(MIN_WINDOW, num_train_steps // 10)
        self.stuck_steps = STUCK_FRACTION * (num_train_steps - num_warmup_steps)
        self.stuck_windows = max(STUCK_WINDOWS, math.ceil(self.stuck_steps / self.window))
        self._window_start: int | None = None   # first step of the current window, minus one
        self._window_sum = 0.0
        # The windows at ln K in a row: the first one's first step, how many, the sum of their means.
        self._stuck_first, self._stuck_count, self._stuck_mean_sum = -1, 0, 0.0
        self._constant_since: int | None = None  # an evaluation that gave every example one class
        self._verdict: Verdict | None = None
        self._reported = False
        self._left: Verdict | None = None  # the window that left ln K after a loss verdict
        self._left_reported = False

    def next_boundary(self, step: int) -> int:
        """The first step after `step` at which a loop of steps should end: the end of
        warm-up, then the end of each window (`num_train_steps` when there is none)."""
        if self.chance_loss is None or not self._watching_loss():
            return self.num_train_steps
        if step < self.num_warmup_steps:
            return self.num_warmup_steps
        start = step if self._window_start is None else self._window_start
        return min(start + self.window, self.num_train_steps)

    def observe_loss(self, previous_step: int, step: int, loss_sum: float) -> None:
        """The steps `previous_step + 1` .. `step` (one loop, not across a boundary) had losses
        summing to `loss_sum`."""
        if self.chance_loss is None or not self._watching_loss() or step <= self.num_warmup_steps:
            return
        if self._window_start is None:
            self._window_start = max(previous_step, self.num_warmup_steps)
        self._window_sum += loss_sum
        if step - self._window_start < self.window:
            return
        mean = self._window_sum / (step - self._window_start)
        if self._verdict is not None:
            self._see_leaving(step, mean)
        elif abs(mean - self.chance_loss) <= TOLERANCE * self.chance_loss:
            if not self._stuck_count:
                self._stuck_first = self._window_start + 1
            self._stuck_count += 1
            self._stuck_mean_sum += mean
        else:
            self._stuck_first, self._stuck_count, self._stuck_mean_sum = -1, 0, 0.0
        self._window_start, self._window_sum = step, 0.0
        if self._verdict is None:
            self._judge_windows()

    def _watching_loss(self) -> bool:
        """Whether the loss windows go on: until a verdict, and after a loss verdict until the run
        leaves chance."""
        return self._verdict is None or (self._verdict.from_loss and self._left is None)

    def _see_leaving(self, step: int, mean: float) -> None:
        """After a loss verdict: the window ending at `step` had mean loss `mean`."""
        if mean < (1 - TOLERANCE) * self.chance_loss:
            self._left = Verdict(f"the training loss averaged {mean:.4f} over steps {self._window_start + 1}-{step}, "
                                 f"below {self._chance_text}: the run is learning after all", step, from_loss=True)

    def _judge_windows(self) -> None:
        """The loss verdict, once the windows at ln K in a row (the last ending at the current
        window's start) are enough."""
        if self._stuck_count < self.stuck_windows:
            return
        last, mean = self._window_start, self._stuck_mean_sum / self._stuck_count
        self._verdict = Verdict(
            f"the training loss has stayed within {TOLERANCE:.0%} of {self._chance_text}, the loss of a model "
            f"that has learned nothing, over steps {self._stuck_first}-{last} (mean {mean:.4f})", last,
            from_loss=True)

    def observe_predictions(self, step: int, predicted: np.ndarray, label_names=None) -> None:
        """The classes an evaluation at `step` predicted [N] (ids; `label_names` names them)."""
        if self._verdict is not None or step <= self.num_warmup_steps:
            return
        said = constant_prediction(predicted, label_names)
        if not said:
            self._constant_since = None
            return
        if self._constant_since is None:
            self._constant_since = step
        elif step - self._constant_since >= self.stuck_steps:
            self._verdict = Verdict(f"{said}, as at every evaluation since step {self._constant_since}", step,
                                    from_loss=False)

    def verdict(self) -> Verdict | None:
        """The verdict, the first time it is asked for after the run was found stuck (else None)."""
        if self._verdict is None or self._reported:
            return None
        self._reported = True
        return self._verdict

    def left_chance(self) -> Verdict | None:
        """The window after a loss verdict whose mean loss lay below the band (`reason`, its last
        `step`), the first time it is asked for after it was seen (else None)."""
        if self._left is None or self._left_reported:
            return None
        self._left_reported = True
        return self._left

    def state(self) -> dict[str, float]:
        """What the watch has seen, as numbers (steps are exact as floats): a training state
        holds them, `resume` takes them back."""
        return {"window_start": -1 if self._window_start is None else self._window_start,
                "window_sum": self._window_sum, "stuck_first": self._stuck_first,
                "stuck_count": self._stuck_count, "stuck_mean_sum": self._stuck_mean_sum,
                "constant_since": -1 if self._constant_since is None else self._constant_since,
                "reported": float(self._reported)}

    def resume(self, state: dict[str, float]) -> None:
        """Goes on from `state()` saved at the step a run resumes from. A verdict the windows had
        reached and not yet acted on is given at the next `verdict()`; one already said is not
        said again."""
        start, since = int(state["window_start"]), int(state["constant_since"])
        self._window_start = None if start < 0 else start
        self._window_sum = float(state["window_sum"])
        self._stuck_first, self._stuck_count = int(state["stuck_first"]), int(state["stuck_count"])
        self._stuck_mean_sum = float(state["stuck_mean_sum"])
        self._constant_since = None if since < 0 else since
        self._reported = bool(state["reported"])
        self._verdict = None
        self._judge_windows()
        if self._reported and self._verdict is None:  # (said from the evaluations)
            self._verdict = Verdict("said before the run was resumed", self._window_start or 0, from_loss=False)


def advice(learning_rate: float, bias_correction: bool, restart: bool = True, hint: str | None = None) -> str:
    """What usually helps a stuck run, for the end of its warning line (`restart`: with
    --on_stuck=restart among it; `hint`: what to change of an option the run has on that most
    likely keeps it at chance, said first)."""
    helps = [*([hint] if hint else []), "another --seed", f"a lower --learning_rate (now {learning_rate:g})"]
    if not bias_correction:
        helps.append("--adam_bias_correction")
    if restart:
        helps.append("--on_stuck=restart")
    return "what usually helps: " + ", ".join(helps[:-1]) + ", or " + helps[-1]


def constant_prediction(predicted: np.ndarray, label_names=None) -> str | None:
    """'all N predictions of the evaluation are one class, 'x'' when `predicted` [N] (class
    ids; `label_names` names them) holds one class, else None."""
    predicted = np.asarray(predicted)
    if len(predicted) < 2 or not np.all(predicted == predicted[0]):
        return None
    label = str(predicted[0]) if label_names is None else label_names[int(predicted[0])]
    return f"all {len(predicted)} predictions of the evaluation are one class, {label!r}"
