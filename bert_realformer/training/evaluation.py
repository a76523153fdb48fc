"""Evaluations and their results: eval_results.txt written as the original scripts write it
(`write_eval_results`, the numbers also to TensorBoard), and held-out evaluation every N steps
of training: `OUTPUT_DIR/eval_history.jsonl`, one JSON
object per evaluation (`{"step": 500, "masked_lm_accuracy": 0.31, ...}`), in step order, and
the same numbers in TensorBoard (`OUTPUT_DIR/eval/`).

The first point is step 0, evaluated before training: a run continued from a released checkpoint
shows where it starts. A resumed run keeps exactly one point per evaluation step: points after the step it resumes
from are dropped (the resumed run evaluates those steps again, with the same weights), and a
point due at that step which the killed run did not write is written first.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from collections.abc import Callable

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from bert_realformer.training.hooks import HookRun, TrainingHook

FILE_NAME = "eval_history.jsonl"
EVAL_SUMMARIES = "eval"  # OUTPUT_DIR/eval/: TensorBoard's eval curves, beside OUTPUT_DIR/train/


@dataclasses.dataclass
class PeriodicEval(TrainingHook):
    """The hook that evaluates during training: `evaluate(step) -> {metric: number}` (or
    `(result, classes)`, the class each example got, which other hooks may read) before the first
    step (step 0: the model a run starts from; not with `at_start=False`), at every multiple of
    `every_steps` and at the last step of training, into the chief's eval history. Each
    evaluation runs in the hooks' evaluation context and is handed to every hook
    (`HookRun.report_evaluation`: the best checkpoint keeps it). `shown`: the metrics the line
    after each evaluation shows (None: every number)."""
    every_steps: int
    evaluate: Callable[[int], dict | tuple]
    at_start: bool = True
    shown: tuple[str, ...] | None = None
    history: EvalHistory | None = dataclasses.field(default=None, init=False, repr=False)

    def on_train_begin(self, run: HookRun) -> None:
        """The chief's eval history, trimmed to the step training starts at."""
        if run.is_chief:
            self.history = EvalHistory(run.output_dir)
            self.history.resume_at(run.first_step)

    def next_boundary(self, run: HookRun, step: int) -> int:
        return self.next_due(step, run.task.num_train_steps)

    def at_step(self, run: HookRun, step: int) -> None:
        """The evaluation due at `step` unless the history has it (a resumed run's first point)."""
        if self.history is None or not self.due(step, run.task.num_train_steps) or self.history.has(step):
            return
        with run.evaluating():
            outcome = self.evaluate(step)
            result, classes = outcome if isinstance(outcome, tuple) else (outcome, None)
            best = run.report_evaluation(step, result, classes)
        self.history.add(step, result)
        run.say(f"eval at step {step}: {self.line(result)}{' (best so far)' if best else ''}")

    def due(self, step: int, last_step: int) -> bool:
        if step == 0 and not self.at_start:
            return False
        return step % self.every_steps == 0 or step == last_step

    def next_due(self, step: int, last_step: int) -> int:
        """The first step after `step` at which an evaluation is due."""
        return min((step // self.every_steps + 1) * self.every_steps, last_step)

    def line(self, result: dict) -> str:
        """'loss 1.2345, masked_lm_accuracy 0.3100': the numbers of `result` to show."""
        names = sorted(k for k, v in result.items() if k != "global_step" and isinstance(v, numbers.Real)
                       and not isinstance(v, bool) and (self.shown is None or k in self.shown))
        return ", ".join(f"{name} {result[name]:.4f}" for name in names)


def once_per_step(evaluate: Callable[[int], dict]) -> Callable[[int], dict]:
    """`evaluate(step)`, except that asked again for the step it evaluated last it gives a copy
    of that result: the evaluation at training's last step is also `--do_eval`'s, the same
    weights on the same held-out batches, once. Only for a process whose weights do not change
    within a step."""
    last: dict[int, dict] = {}

    def evaluated(step: int) -> dict:
        if step not in last:
            last.clear()
            last[step] = evaluate(step)
        return dict(last[step])
    return evaluated


def read_history(path: str) -> list[dict]:
    """The points of an eval_history.jsonl ([] when there is none); a malformed line stops
    with its file and line number."""
    if not storage.exists(path):
        return []
    points = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            point = json.loads(line)
            int(point["step"])
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"{path}:{number}: expected a JSON object with a step: {error}") from None
        points.append(point)
    return points


class EvalHistory:
    """The history file of one run directory; only the chief writes it."""

    def __init__(self, output_dir: str):
        self.path = os.path.join(output_dir, FILE_NAME)
        self.summaries = os.path.join(output_dir, EVAL_SUMMARIES)
        self.points = read_history(self.path)

    def resume_at(self, step: int) -> None:
        """Drops the points after `step` (written by a run that was killed before saving)."""
        kept = [p for p in self.points if int(p["step"]) <= step]
        if len(kept) != len(self.points):
            self.points = kept
            self._write()

    def has(self, step: int) -> bool:
        return any(int(p["step"]) == step for p in self.points)

    def add(self, step: int, result: dict) -> None:
        point = {"step": step, **{k: v for k, v in result.items() if k != "global_step"}}
        self.points = [p for p in self.points if int(p["step"]) != step] + [point]
        self.points.sort(key=lambda p: int(p["step"]))
        self._write()
        write_eval_summaries(result, self.summaries, step)

    def _write(self):
        storage.write_atomic(self.path, "".join(json.dumps(p, sort_keys=True) + "\n" for p in self.points))



def write_eval_results(result, path, step=None):
    """`key = value` lines sorted by key (the original's eval_results.txt), written atomically;
    the numbers also go to TensorBoard in `eval/` beside the file, at `step` (default: the
    result's `global_step`)."""
    storage.write_atomic(path, "".join(f"{key} = {result[key]}\n" for key in sorted(result)))
    write_eval_summaries(result, os.path.join(os.path.dirname(path), EVAL_SUMMARIES),
                         result.get("global_step", 0) if step is None else step)


def write_eval_summaries(result, directory, step):
    """Every real number of `result` (not `global_step`, the x axis) as a TensorBoard scalar."""
    import tensorflow as tf
    step = int(step)
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=step):
        for key in sorted(result):
            value = result[key]
            if key != "global_step" and isinstance(value, numbers.Real) and not isinstance(value, bool):
                tf.summary.scalar(key, float(value))
    writer.close()
