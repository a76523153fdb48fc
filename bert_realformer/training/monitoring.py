"""Watching a fine-tuning run, the same for every task: dev-set evaluations during training, the
best checkpoint and early stopping (`training.best_checkpoint`), and the check for a run that
learns nothing (`training.stuck`).

A task hands over one function, `evaluate(step) -> (result, predicted)`: its eval_results.txt
entries for the dev set with the driver's current weights, and the class each example got
(None where there are no classes: spans, tags, scores), which the stuck check reads.

    task = monitored(task, evaluate, num_classes=2, every_steps=100,
                     selection=Selection.by("eval_accuracy", patience=3))
    step = driver.train_restarting(lambda seed: monitored(make_task(seed), ...))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from bert_realformer.training.best_checkpoint import Selection
from bert_realformer.training.driver import TrainingTask
from bert_realformer.training.eval_history import PeriodicEval
from bert_realformer.training.stuck import StuckWatch

Evaluate = Callable[[int], tuple[dict, "np.ndarray | None"]]


def monitored(task: TrainingTask, evaluate: Evaluate | None, *, num_classes: int | None,
              label_names: Sequence[str] | None = None, every_steps: int = 0, selection: Selection | None = None,
              shown: tuple[str, ...] | None = None, chance_loss: float | None = None) -> TrainingTask:
    """`task` with the stuck check (chance loss ln `num_classes` unless `chance_loss` says
    otherwise; `num_classes` None: no loss sign) and, when
    `every_steps`, an evaluation every `every_steps` steps and at the end (not before the first
    step), whose best by `selection` is kept. `shown`: the metrics the progress line shows."""
    watch = StuckWatch(num_classes, task.num_warmup_steps, task.num_train_steps, chance_loss)
    periodic = None
    if every_steps:
        if evaluate is None:
            raise ValueError("evaluations during training need an evaluate function")

        def periodic_evaluate(step):
            result, predicted = evaluate(step)
            if predicted is not None:
                watch.observe_predictions(step, predicted, label_names)
            return result

        periodic = PeriodicEval(every_steps, periodic_evaluate, at_start=False, shown=shown)
    return dataclasses.replace(task, stuck=watch, periodic_eval=periodic,
                               keep_best=selection if every_steps else None)
