"""What a stuck run's verdict leads to (`Driver.train_restarting`): a warning recorded in the run's
record, or a restart, with what is put aside and what is recorded."""

import os
import time
from collections.abc import Callable

from bert_realformer import storage
from bert_realformer.checkpoints import training_states
from bert_realformer.training import recorded_options
from bert_realformer.training.stuck import StuckWatch, Verdict, advice

# What a restarted run's chief keeps of the stuck run, in OUTPUT_DIR/stuck_runs/seed-S/.
SET_ASIDE = ("train", "eval", "eval_history.jsonl")


class StuckRun(Exception):
    """Raised out of `Driver.train` when a run is stuck and may restart."""

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


def act_on_verdict(watch: StuckWatch | None, restarts_left: int, write_dir: str, learning_rate: float,
                   bias_correction: bool, say: Callable[[str], None], refused: str | None = None,
                   restarting: bool = False) -> None:
    """Raises `StuckRun` when the watch has a new loss verdict and the run may restart (restarts
    left, and no `refused`: why `RestartDeadline` refuses one now); else, for a new verdict,
    records it in WRITE_DIR/training_options.json and warns once, with the refusal (`restarting`:
    the run has --on_stuck=restart, so the warning does not suggest it). A run that left chance
    after its warning says so once, and its record's `stuck` gains `left_at_step` and
    `left_reason`."""
    if watch is None:
        return
    _record_leaving(watch.left_chance(), write_dir, say)
    verdict = watch.verdict()
    if verdict is None:
        return
    may_restart = verdict.from_loss and restarts_left > 0
    if may_restart and refused is None:
        raise StuckRun(verdict)
    refused = refused if may_restart else None
    recorded_options.update(write_dir, stuck={"step": verdict.step, "reason": verdict.reason,
                                              **({"no_restart": refused} if refused else {})})
    no_restart = f"; no restart: {refused}" if refused else ""
    say(f"warning: this run looks stuck: {verdict.reason}{no_restart}; "
        f"{advice(learning_rate, bias_correction, restart=not restarting)}")


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
