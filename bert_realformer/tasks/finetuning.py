"""The one fine-tuning flow, the same for every task (`tasks.contract.FinetuningTask`): read the
splits the plan asks for, train (dev-set evaluations every N steps with the best checkpoint kept
and early stopping, the stuck check and restarts: `training.monitoring`) or load the weights of
an earlier run, evaluate the dev set into eval_results.txt, predict the test set, export.

    plan = Plan(do_train=True, do_eval=True, schedule=lambda seed: Schedule(32, 2e-5, 3.0, seed=seed))
    finetuning.run(task, plan, make_driver)   # make_driver(build_model) -> (driver, tokenizer)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bert_realformer import report
from bert_realformer.tasks.contract import Evaluation, FinetuningTask
from bert_realformer.training import recorded_options
from bert_realformer.training.best_checkpoint import Selection
from bert_realformer.training.monitoring import monitored
from bert_realformer.training.results import write_eval_results
from bert_realformer.training.stuck import constant_prediction

if TYPE_CHECKING:  # annotations only
    import keras

    from bert_realformer.training.driver import Driver
    from bert_realformer.training.per_example import Schedule
    from modeling import BertConfig
    from tokenization import FullTokenizer

EVAL_RESULTS = "eval_results.txt"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a fine-tuning run does.

    schedule: `seed -> Schedule` of the training (a restart takes the next seed).
    eval_every_steps: with training, evaluate the dev set every N steps (0: only at the end),
      keeping the best checkpoint by `keep_best_by` (default: the task's main metric; a loss is
      minimised) and stopping after `early_stopping_patience` evaluations without a better one.
    use_best_checkpoint: evaluation, prediction and export use the run's best checkpoint when it
      kept one (else the weights training ended with).
    """
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    schedule: Callable[[int], Schedule] | None = None
    eval_every_steps: int = 0
    keep_best_by: str | None = None
    early_stopping_patience: int = 0
    use_best_checkpoint: bool = True
    export_dir: str | None = None

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split, wanted in (("train", self.do_train), ("dev", self.do_eval),
                                                 ("test", self.do_predict)) if wanted)


def best_metric(keep_best_by: str | None, metrics: Sequence[str]) -> str:
    """The metric that picks the best checkpoint: `keep_best_by` (`loss` meaning `eval_loss`
    where the evaluation reports it), else the task's main metric (the first of `metrics`)."""
    if not keep_best_by:
        return metrics[0]
    if keep_best_by == "loss" and "eval_loss" in metrics:
        return "eval_loss"
    return keep_best_by


MakeDriver = Callable[[Callable[["BertConfig"], "keras.Model"]], tuple["Driver", "FullTokenizer"]]


def run(task: FinetuningTask, plan: Plan, make_driver: MakeDriver) -> int:
    """Runs `plan` for `task`: its data is read (and checked) first, then the driver is made
    with the task's model (`make_driver(task.build_model) -> (driver, tokenizer)`). Returns the
    step of the weights evaluation and prediction used."""
    data = task.read(plan.splits)
    driver, tokenizer = make_driver(task.build_model)
    with driver:  # (its claim on the output directory released however the run ends)
        return _run(task, plan, data, driver, tokenizer)


def _run(task, plan, data, driver, tokenizer):
    selection = Selection.by(best_metric(plan.keep_best_by, task.metrics),
                             patience=plan.early_stopping_patience or None)

    def evaluate(step: int) -> Evaluation:
        return task.evaluate(data.dev, task.predict(driver, tokenizer, data.dev, "dev"), step, selection)

    if plan.do_train:
        _record(task, driver)
        step = _train(task, driver, tokenizer, data.train, evaluate if data.dev is not None else None, plan,
                      selection)
    else:
        step = driver.restore_for_inference(prefer_best=plan.use_best_checkpoint)
    if data.dev is not None:
        evaluation = evaluate(step)
        task.write_predictions(data.dev, evaluation.predictions, "dev")
        write_results(driver, task, evaluation)
    task.settle(driver)
    if plan.do_train:
        _record(task, driver)
    if data.test is not None:
        task.write_predictions(data.test, task.predict(driver, tokenizer, data.test, "test"), "test")
    if plan.export_dir:
        report.say(f"exported {task.export(driver, tokenizer, plan.export_dir)}")
    return step


def _record(task, driver):
    options = task.recorded_options()
    if options:
        recorded_options.update(driver.write_dir, **options)


def _train(task, driver, tokenizer, examples, evaluate, plan, selection):
    """Trains under the plan's monitoring; returns the step of the weights the model then holds:
    the best checkpoint's when the run kept one (and `use_best_checkpoint`), else the last."""

    def classes_evaluate(step):
        evaluation = evaluate(step)
        return evaluation.result, evaluation.classes

    def monitored_task(seed):
        training = task.training_task(examples, tokenizer, plan.schedule(seed))
        report.say(training.summary)
        return monitored(training, classes_evaluate if evaluate else None, num_classes=task.num_classes,
                         label_names=task.label_names, every_steps=plan.eval_every_steps, selection=selection,
                         shown=task.shown or task.metrics, chance_loss=task.chance_loss)

    step = driver.train_restarting(monitored_task)
    return driver.use_best(step) if plan.use_best_checkpoint else step


def write_results(driver: Driver, task: FinetuningTask, evaluation: Evaluation) -> None:
    """OUTPUT_DIR/eval_results.txt of the final evaluation, with the run's seed and restarts when
    it restarted; a warning line when every example got one class; the task's shown metrics."""
    result = evaluation.result
    restarts = recorded_options.read(driver.write_dir).get("restarts") or []
    if restarts:
        result = {**result, "seed": driver.options.seed, "restarts": len(restarts)}
    write_eval_results(result, os.path.join(task.options.output_dir, EVAL_RESULTS))
    said = None if evaluation.classes is None else constant_prediction(evaluation.classes, task.label_names)
    if said:
        report.say(f"warning: {said}: the model predicts one class for everything (stuck? another --seed or a "
                   "lower --learning_rate usually helps)")
    for key in task.shown or task.metrics:
        if key in result:
            report.say(f"  {key} = {result[key]}")
