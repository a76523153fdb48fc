"""The stuck check in a run (`StuckCheck`, a training hook) and what its verdict leads to: a
warning recorded in the run's record, or a restart with the next seed (`train_restarting`), with
what is put aside and what is recorded.

The check's windows (`StuckWatch.state`) are held in the training state as `stuck_watch`
(`WatchVariables`: copied in before each save, back after a resume), so that a run killed and
resumed finds a stuck run at the step the uninterrupted run does (and `--on_stuck=restart`
restarts it there). A training state written without them resumes with windows that start again
from the resumed step.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

import tensorflow as tf

from bert_realformer import checkpoints, storage
from bert_realformer.checkpoints import training_states
from bert_realformer.errors import InputError
from bert_realformer.finetuning.stuck import StuckWatch, Verdict, advice
from bert_realformer.training import recorded_options
from bert_realformer.training.distribution import this_worker
from bert_realformer.training.hooks import HookRun, TrainingHook

# What a restarted run's chief keeps of the stuck run, in OUTPUT_DIR/stuck_runs/seed-S/.
SET_ASIDE = ("train", "eval", "eval_history.jsonl")


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One attempt of a fine-tuning run (`train_restarting`): the restarts it may still make (0: a
    stuck run is only warned of), whether it is itself a restart, and the seed it trains with
    (None: the run's)."""
    restarts_left: int = 0
    restarting: bool = False
    seed: int | None = None


class StuckRun(Exception):
    """Raised out of `Driver.train` (by `StuckCheck.at_step`) when a run is stuck and may restart."""

    def __init__(self, verdict: Verdict):
        super().__init__(verdict.reason)
        self.verdict = verdict


class RestartDeadline:
    """`--restart_deadline`: a stuck run starts again only when, at the pace of its attempt so far
    (the steps since `first_step`, tracing and evaluations included), the new attempt would
    end by `at` (Unix seconds; 0: no limit). A study sized to a time budget gives each fine-tuning
    run the time its later runs leave (`comparison.sizing`), so restarts use only the budget's room."""

    def __init__(self, at: float, first_step: int, clock: Callable[[], float] = time.time):
        self.at, self.clock = at, clock
        self._started = (clock(), first_step)

    def refusal(self, step: int, total_steps: int) -> str | None:
        """Why a restart at `step` of `total_steps` would end too late (None: it may restart)."""
        if not self.at:
            return None
        (then, first_step), now = self._started, self.clock()
        pace = (now - then) / (step - first_step) if step > first_step else 0.0  # (s/step; 0: not known yet)
        ends = now + pace * total_steps
        if ends <= self.at:
            return None
        return (f"started again it would end about {time.strftime('%H:%M:%S', time.localtime(ends))}, after "
                f"--restart_deadline ({time.strftime('%H:%M:%S', time.localtime(self.at))})")


ONLY_THE_CHIEF_EVALUATES = ("found from the evaluations, which only the chief sees: a run of several workers "
                            "restarts on its training loss alone")


def act_on_verdict(watch: StuckWatch | None, restarts_left: int, write_dir: str, learning_rate: float,
                   bias_correction: bool, say: Callable[[str], None], refused: str | None = None,
                   restarting: bool = False, one_worker: bool = True, hint: str | None = None) -> None:
    """Raises `StuckRun` when the watch has a new verdict and the run may restart (restarts
    left; a verdict from the evaluations only in a run of `one_worker`; and no `refused`: why
    `RestartDeadline` refuses one now); else, for a new verdict, records it in
    WRITE_DIR/training_options.json and warns once, with the refusal (`restarting`: the run has
    --on_stuck=restart, so the warning does not suggest it; `hint`: an option of the run that
    most likely caused it, said first). A run that left chance after its warning says so once,
    and its record's `stuck` gains `left_at_step` and `left_reason`."""
    if watch is None:
        return
    _record_leaving(watch.left_chance(), write_dir, say)
    verdict = watch.verdict()
    if verdict is None:
        return
    if restarts_left > 0 and not verdict.from_loss and not one_worker:
        refused = ONLY_THE_CHIEF_EVALUATES
    if restarts_left > 0 and refused is None:
        raise StuckRun(verdict)
    refused = refused if restarts_left > 0 else None
    recorded_options.update(write_dir, stuck={"step": verdict.step, "reason": verdict.reason,
                                              **({"no_restart": refused} if refused else {})})
    no_restart = f"; no restart: {refused}" if refused else ""
    say(f"warning: this run looks stuck: {verdict.reason}{no_restart}; "
        f"{advice(learning_rate, bias_correction, restart=not restarting, hint=hint)}")


def _record_leaving(left: Verdict | None, write_dir: str, say: Callable[[str], None]) -> None:
    """Records the window that left chance beside the warning (once: a resumed run's watch may
    see a later window leave it again)."""
    stuck = None if left is None else recorded_options.read(write_dir).get("stuck")
    if not stuck or "left_at_step" in stuck:
        return
    recorded_options.update(write_dir, stuck={**stuck, "left_at_step": left.step, "left_reason": left.reason})
    say(f"this run has left chance since its warning: {left.reason}")


def restart_line(verdict: Verdict, seed: int, restarts: list[dict], max_restarts: int) -> str:
    """What a restart with `seed` says."""
    return (f"stuck at step {verdict.step}: {verdict.reason}; starting again from the initial weights with "
            f"--seed={seed} (restart {len(restarts) + 1} of at most {max_restarts})")


def set_aside(output_dir: str, write_dir: str, seed: int, is_chief: bool, verdict: Verdict,
              restarts: list[dict]) -> None:
    """Removes the stuck run's training states (and, on the chief, its best checkpoint), moves its
    eval history and TensorBoard curves to OUTPUT_DIR/stuck_runs/seed-SEED/, and records the
    restart and the next seed in WRITE_DIR/training_options.json."""
    storage.rmtree(os.path.join(write_dir, training_states.TRAINING_STATE))
    if is_chief:
        storage.rmtree(os.path.join(output_dir, "best"))
        aside = os.path.join(output_dir, "stuck_runs", f"seed-{seed}")
        storage.rmtree(aside)
        for name in SET_ASIDE:
            path = os.path.join(output_dir, name)
            if storage.exists(path):
                storage.makedirs(aside)
                (storage.move_tree if storage.isdir(path) else storage.rename)(path, os.path.join(aside, name))
    restarts = [*restarts, {"seed": seed, "step": verdict.step, "reason": verdict.reason}]
    recorded_options.update(write_dir, seed=seed + 1, restarts=restarts, stuck=None)


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


class StuckCheck(TrainingHook):
    """The hook that watches a run for learning nothing (`watch`), from its training loss after
    each loop of steps and the classes its evaluations give (`label_names` name them), and acts on
    a verdict at the step it comes: a warning (naming `hint` first, an option of the run that most
    likely caused it), or `StuckRun` to restart (with `on_stuck="restart"` and restarts left to
    the `attempt`, unless `restart_deadline`, Unix seconds, would be passed).
    An attempt that is a restart keeps the restarts so far in its record."""

    def __init__(self, watch: StuckWatch, attempt: Attempt = Attempt(), label_names: Sequence[str] | None = None,
                 on_stuck: str = "warn", restart_deadline: float = 0.0, hint: str | None = None):
        self.watch, self.attempt, self.label_names = watch, attempt, label_names
        self.on_stuck, self.restart_deadline, self.hint = on_stuck, restart_deadline, hint
        self.variables: WatchVariables | None = None
        self.deadline: RestartDeadline | None = None

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict:
        self.variables = WatchVariables.for_training_state(self.watch, resumed_from)
        return {} if self.variables is None else {WatchVariables.NAME: self.variables}

    def recorded_options(self, run: HookRun) -> dict:
        return {"stuck": None, **({} if self.attempt.restarting else {"restarts": []})}

    def on_weights_set(self, run: HookRun) -> list[str]:
        if self.variables is not None and run.resuming:
            self.variables.after_restore()
        self.deadline = RestartDeadline(self.restart_deadline, run.first_step)
        return []

    def next_boundary(self, run: HookRun, step: int) -> int:
        return self.watch.next_boundary(step)

    def after_steps(self, run: HookRun, previous: int, step: int, metrics: dict) -> None:
        self.watch.observe_loss(previous, step, metrics["loss_sum"])

    def before_save(self, run: HookRun, step: int) -> None:
        if self.variables is not None:
            self.variables.before_save()

    def on_evaluation(self, run: HookRun, step: int, result: dict, classes) -> bool:
        if classes is not None:
            self.watch.observe_predictions(step, classes, self.label_names)
        return False

    def at_step(self, run: HookRun, step: int) -> None:
        act_on_verdict(self.watch, self.attempt.restarts_left, run.write_dir, run.task.learning_rate,
                       run.bias_correction, run.say, self.deadline.refusal(step, run.task.num_train_steps),
                       self.on_stuck == "restart", this_worker(run.strategy)[0] == 1, self.hint)


def restart_deadline_for(deadline: float, strategy) -> float:
    """`deadline`, refused for several processes: each would judge the time by its own clock and
    pace, and one restarting without the others would leave them waiting."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec() if resolver is not None and resolver.task_type else None
    if deadline and spec is not None and sum(spec.num_tasks(job) for job in spec.jobs) > 1:
        raise InputError("restart_deadline: not for a multi-worker run (each worker would judge the time on its "
                         "own); leave it at 0 there", options=("restart_deadline",))
    return deadline


def train_restarting(driver, attempt: Callable[[Attempt], tuple], on_stuck: str = "warn",
                     max_restarts: int = 0) -> int:
    """`driver.train(*attempt(Attempt(restarts_left, restarting, seed)))`, the attempt's hooks
    holding a `StuckCheck` of that attempt; with `on_stuck="restart"`, a run found stuck starts again
    from its initial weights with the next seed, at most `max_restarts` times (over the run's life:
    a resumed run keeps its count). Each restart is said, the stuck run set aside (`set_aside`), and
    recorded in WRITE_DIR/training_options.json. Returns the step training ended at."""
    restarting = _resume_interrupted_restart(driver)
    while True:
        restarts = recorded_options.read(driver.write_dir).get("restarts", [])
        left = max_restarts - len(restarts) if on_stuck == "restart" else 0
        task, hooks = attempt(Attempt(left, restarting, driver.options.seed))
        try:
            return driver.train(task, hooks)
        except StuckRun as stuck:
            options, seed = driver.options, driver.options.seed + 1
            driver.say(restart_line(stuck.verdict, seed, restarts, max_restarts))
            set_aside(options.output_dir, driver.write_dir, options.seed, options.is_chief, stuck.verdict, restarts)
            driver.restart(seed)
            restarting = True


def _resume_interrupted_restart(driver) -> bool:
    """Whether this run goes on with a restart that an earlier process began and was stopped in
    before it saved a training state (the record names the restarts and the seed they led to; no
    training state): the driver takes up that seed, so the run ends as the uninterrupted one (as a
    resumed run keeps its recorded seed, whatever its flags now say)."""
    record = recorded_options.read(driver.write_dir)
    restarts, seed = record.get("restarts") or [], record.get("seed")
    state_dir = os.path.join(driver.write_dir, training_states.TRAINING_STATE)
    if not restarts or seed is None or \
            (storage.isdir(state_dir) and tf.train.latest_checkpoint(state_dir) is not None):
        return False
    driver.say(f"going on with restart {len(restarts)} (--seed={int(seed)}), which an "
               "earlier run of this directory began and was stopped in before it saved a training state")
    driver.restart(int(seed))
    return True
