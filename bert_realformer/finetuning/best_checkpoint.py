"""The best checkpoint of a fine-tuning run, by a metric of its evaluations during training, and
early stopping (`KeepBest`, a training hook).

    OUTPUT_DIR/best/model.ckpt-300     the weights of the best evaluation so far (TF1 names)
    OUTPUT_DIR/best/best.json          {"step": 300, "metric": "eval_accuracy", "value": 0.8, "metrics": {...}}

`--init_checkpoint=OUTPUT_DIR/best` (or the prefix) gives those weights to any script and to
`convert_checkpoint.py`. best.json is the one word on which checkpoint is the best: every reader
of the directory resolves through it, and a new best's files are written first, then best.json,
then the `checkpoint` file (what TensorFlow's own readers take), so a kill at any moment leaves
every reader on one best. A new best is written before its evaluation enters the eval history.
The previous best's checkpoint is removed only once a training state at or after the new best's
step is saved, so that a run killed at any moment and resumed from its last training state finds
the best of the evaluations up to that state on disk: `resume_at` rebuilds the best, and the
count of evaluations since it (early stopping), from the eval history, which the driver trims to
the step it resumes from; checkpoints of evaluations after that step are dropped (the resumed run
makes them again, with the same weights). A killed and resumed run so picks the same best step
as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os

from bert_realformer import storage
from bert_realformer.checkpoints import save_tf1_checkpoint, training_states
from bert_realformer.checkpoints.formats import BEST_RECORD
from bert_realformer.checkpoints.tf1 import CheckpointError, read_checkpoint_tensors, write_checkpoint_state
from bert_realformer.checkpoints.training_states import Checkpoint
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from bert_realformer.training.evaluation import FILE_NAME as HISTORY_FILE
from bert_realformer.training.evaluation import read_history
from bert_realformer.training.hooks import HookRun, TrainingHook

BEST_DIR = "best"
RECORD = BEST_RECORD
_PREFIX = "model.ckpt-"


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which evaluation is best: the largest `metric` (the smallest when `minimize`, as for a
    loss); ties keep the earlier step. `patience`: stop training after that many evaluations in a
    row without a better one (None: never)."""
    metric: str
    minimize: bool = False
    patience: int | None = None

    @classmethod
    def by(cls, metric: str, patience: int | None = None) -> Selection:
        """A selection by `metric`: minimised when its name says it is a loss."""
        return cls(metric, minimize="loss" in metric, patience=patience)

    def better(self, value: float, than: float | None) -> bool:
        if than is None:
            return True
        return value < than if self.minimize else value > than

    def value_of(self, result: dict) -> float:
        """The metric in an evaluation's result; an `InputError` listing the metrics there are
        when it has none of that name."""
        value = result.get(self.metric)
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            names = sorted(k for k, v in result.items() if isinstance(v, numbers.Real) and k != "global_step"
                           and not isinstance(v, bool))
            raise InputError(f"keep_best_by={self.metric}: the evaluation reports no such number; it reports: "
                             f"{', '.join(names)}", options=("keep_best_by",))
        return float(value)


def best_dir(output_dir: str) -> str:
    return os.path.join(output_dir, BEST_DIR)


def read_record(output_dir: str) -> dict | None:
    """best.json of a run directory ({"step", "metric", "value", "metrics"}), or None when the
    run kept no best checkpoint (or its checkpoint is gone)."""
    path = os.path.join(best_dir(output_dir), RECORD)
    if not storage.isfile(path):
        return None
    try:
        record = json.loads(read_text(path))
        step = int(record["step"])
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(f"{path}: expected a JSON object with a step: {error}") from None
    if not storage.exists(checkpoint_prefix(output_dir, step) + ".index"):
        return None
    return record


def checkpoint_prefix(output_dir: str, step: int) -> str:
    return os.path.join(best_dir(output_dir), f"{_PREFIX}{step}")


def _saved_steps(output_dir: str) -> list[int]:
    directory = best_dir(output_dir)
    if not storage.isdir(directory):
        return []
    steps = []
    for name in storage.listdir(directory):
        if name.startswith(_PREFIX) and name.endswith(".index") and name[len(_PREFIX):-len(".index")].isdigit():
            steps.append(int(name[len(_PREFIX):-len(".index")]))
    return sorted(steps)


def _remove_checkpoint(output_dir: str, step: int) -> None:
    for path in storage.glob(checkpoint_prefix(output_dir, step) + ".*"):
        storage.remove(path)


class BestCheckpoint:
    """The best checkpoint of one run directory (the chief's), kept as its evaluations come."""

    def __init__(self, output_dir: str, selection: Selection):
        self.output_dir = output_dir
        self.selection = selection
        self.best_step: int | None = None
        self.best_value: float | None = None
        self.since_best = 0  # evaluations after the best one

    @classmethod
    def for_run(cls, output_dir: str, selection: Selection, resuming: bool) -> BestCheckpoint:
        """The keeper of a run directory's best checkpoint; a new run (not `resuming`) removes a
        best/ left by an earlier run of the directory."""
        best = cls(output_dir, selection)
        if not resuming:
            best.start_fresh()
        return best

    def start_fresh(self) -> None:
        """A run that starts from nothing: a best/ left by an earlier run is not this run's."""
        storage.rmtree(best_dir(self.output_dir))

    def resume_at(self, step: int, points: list[dict]) -> None:
        """The best among the eval history's `points` (all at or before `step`, the step the
        run resumes from); checkpoints of later evaluations, and older bests, are removed."""
        self.best_step, self.best_value, self.since_best = None, None, 0
        for point in sorted(points, key=lambda p: int(p["step"])):
            value = self.selection.value_of(point)
            if self.selection.better(value, self.best_value):
                self.best_step, self.best_value, self.since_best = int(point["step"]), value, 0
            else:
                self.since_best += 1
        saved = _saved_steps(self.output_dir)
        if self.best_step is not None and self.best_step not in saved:
            # (a directory whose best/ was removed by hand): the next evaluation starts a new best
            self.best_step, self.best_value, self.since_best = None, None, 0
        if self.best_step is not None:
            prefix = checkpoint_prefix(self.output_dir, self.best_step)
            try:
                read_checkpoint_tensors(prefix)  # (every weight read: a damaged file is found before training)
            except CheckpointError as error:
                raise CheckpointError(f"{error}; it is this run's best checkpoint: restore it, or remove "
                                      f"{best_dir(self.output_dir)} to go on without it (the next evaluation keeps "
                                      "a new best)") from None
        for saved_step in saved:
            if saved_step != self.best_step:
                _remove_checkpoint(self.output_dir, saved_step)
        if self.best_step is None:
            storage.rmtree(best_dir(self.output_dir))
        else:
            point = next(p for p in points if int(p["step"]) == self.best_step)
            self._write_record(point)

    def consider(self, step: int, result: dict, model) -> bool:
        """Keeps the model's weights when `result` is the best evaluation so far; returns
        whether it is."""
        value = self.selection.value_of(result)
        if not math.isfinite(value) or not self.selection.better(value, self.best_value):
            self.since_best += 1
            return False
        # Its files, then best.json, then the `checkpoint` file: until best.json names it, every
        # reader (through best.json, `training_states.resolve` too) takes the previous best.
        save_tf1_checkpoint(model, checkpoint_prefix(self.output_dir, step), state_file=False)
        self.best_step, self.best_value, self.since_best = step, value, 0
        self._write_record({"step": step, **result})
        return True

    def state_saved(self, step: int) -> None:
        """A training state of `step` exists: bests before the current one are not needed
        any more (a resume starts at or after the current best)."""
        if self.best_step is None or step < self.best_step:
            return
        for saved_step in _saved_steps(self.output_dir):
            if saved_step < self.best_step:
                _remove_checkpoint(self.output_dir, saved_step)

    def exhausted(self) -> bool:
        """Whether early stopping is due: `patience` evaluations in a row without a better one."""
        patience = self.selection.patience
        return bool(patience) and self.best_step is not None and self.since_best >= patience

    def describe(self) -> str:
        """'eval_accuracy 0.8000 at step 300' (the best so far)."""
        return f"{self.selection.metric} {self.best_value:.4f} at step {self.best_step}"

    def _write_record(self, point: dict) -> None:
        metrics = {k: v for k, v in point.items() if k not in ("step", "global_step")}
        record = {"step": self.best_step, "metric": self.selection.metric, "value": self.best_value,
                  "metrics": metrics}
        directory = best_dir(self.output_dir)
        storage.write_atomic(os.path.join(directory, RECORD), json.dumps(record, indent=2, sort_keys=True) + "\n")
        write_checkpoint_state(directory, f"{_PREFIX}{self.best_step}")


def early_stopping_line(step: int, best: BestCheckpoint | None) -> str:
    """What a run stopping early at `step` says (`best`: the chief's record; None on the others)."""
    if best is None:
        return f"early stopping at step {step} (decided by the chief)"
    return (f"early stopping at step {step}: {best.selection.metric} has not improved in {best.since_best} "
            f"evaluations (best: {best.describe()})")


class KeepBest(TrainingHook):
    """The hook that keeps a run's best checkpoint (the chief's) by `selection` as the
    evaluations during training come (`training.evaluation.PeriodicEval`), and asks for early
    stopping once `selection.patience` evaluations in a row brought no better one."""

    def __init__(self, selection: Selection):
        self.selection = selection
        self.best: BestCheckpoint | None = None

    def on_train_begin(self, run: HookRun) -> None:
        """The best of the eval history up to the step training starts at (a new run: none)."""
        if not run.is_chief:
            return
        self.best = BestCheckpoint.for_run(run.output_dir, self.selection, run.resuming)
        points = read_history(os.path.join(run.output_dir, HISTORY_FILE))
        self.best.resume_at(run.first_step, [point for point in points if int(point["step"]) <= run.first_step])

    def on_evaluation(self, run: HookRun, step: int, result: dict, classes) -> bool:
        return self.best is not None and self.best.consider(step, result, run.model)

    def after_save(self, run: HookRun, step: int) -> None:
        if self.best is not None:
            self.best.state_saved(step)

    def stop_reason(self, run: HookRun, step: int) -> str | None:
        if self.best is None or not self.best.exhausted():
            return None
        return early_stopping_line(step, self.best)

    def on_train_end(self, run: HookRun, step: int) -> list[str]:
        saved = run.latest_saved_step()  # (the final state may precede the last evaluation)
        if self.best is not None and saved is not None:
            self.best.state_saved(saved)
        return []


def load_best(model, output_dir: str, last_step: int | None = None) -> tuple[Checkpoint | None, list[str]]:
    """Loads the run's best checkpoint (OUTPUT_DIR/best/) into `model` when it kept one (None and
    no line when it did not); `last_step`: where training ended, for the line."""
    record = read_record(output_dir)
    if record is None:
        orphans = _saved_steps(output_dir)
        if orphans:  # (not the last weights in its place without a word)
            prefix = checkpoint_prefix(output_dir, orphans[-1])
            raise InputError(f"{best_dir(output_dir)} holds {os.path.basename(prefix)} but not {RECORD}, which says "
                             f"which checkpoint is the best: restore it, give init_checkpoint={prefix} in a new "
                             "output_dir for that checkpoint, or use_best_checkpoint=false for the weights training "
                             "ended with", options=("init_checkpoint", "output_dir", "use_best_checkpoint"))
        return None, []
    step = int(record["step"])
    found = Checkpoint(checkpoint_prefix(output_dir, step), training_states.TF1_KIND, step)
    training_states.load_weights(model, found, strict=True)
    ended = "" if last_step is None else f"; training ended at step {last_step}"
    return found, [f"weights: the best checkpoint {found.prefix} ({record['metric']} {record['value']:.4f} at "
                   f"step {step}{ended})"]
