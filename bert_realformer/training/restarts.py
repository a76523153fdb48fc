"""What a stuck run's verdict leads to (`Driver.train_restarting`): a warning recorded in the run's
record, or a restart, with what is put aside and what is recorded."""

import os
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


def act_on_verdict(watch: StuckWatch | None, restarts_left: int, write_dir: str, learning_rate: float,
                   bias_correction: bool, say: Callable[[str], None]) -> None:
    """Raises `StuckRun` when the watch has a new loss verdict and the run may restart; else, for
    a new verdict, records it in WRITE_DIR/training_options.json and warns once. A run that left
    chance after its warning says so once, and its record's `stuck` gains `left_at_step` and
    `left_reason`."""
    if watch is None:
        return
    _record_leaving(watch.left_chance(), write_dir, say)
    verdict = watch.verdict()
    if verdict is None:
        return
    if verdict.from_loss and restarts_left > 0:
        raise StuckRun(verdict)
    recorded_options.update(write_dir, stuck={"step": verdict.step, "reason": verdict.reason})
    say(f"warning: this run looks stuck: {verdict.reason}; {advice(learning_rate, bias_correction)}")


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
