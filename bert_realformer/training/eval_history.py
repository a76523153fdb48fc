"""Held-out evaluation every N steps of training: `OUTPUT_DIR/eval_history.jsonl`, one JSON
object per evaluation (`{"step": 500, "masked_lm_accuracy": 0.31, ...}`), in step order, and
the same numbers in TensorBoard (`OUTPUT_DIR/eval/`).

The first point is step 0, evaluated before training: a run continued from a released checkpoint
shows where it starts. A resumed run keeps exactly one point per evaluation step: points after the step it resumes
from are dropped (the resumed run evaluates those steps again, with the same weights), and a
point due at that step which the killed run did not write is written first.
"""

import dataclasses
import json
import numbers
import os
from collections.abc import Callable

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text
from bert_realformer.training.results import EVAL_SUMMARIES, write_eval_summaries

FILE_NAME = "eval_history.jsonl"


@dataclasses.dataclass
class PeriodicEval:
    """`evaluate(step) -> {metric: number}` before the first step (step 0: the model a run
    starts from; not with `at_start=False`), at every multiple of `every_steps` and at the last
    step of training. `shown`: the metrics the progress line shows (None: every number)."""
    every_steps: int
    evaluate: Callable[[int], dict]
    at_start: bool = True
    shown: tuple[str, ...] | None = None

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
