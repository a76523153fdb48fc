"""What every fine-tuning script shares around its task: the flags for evaluating on the dev set
during training, keeping the best checkpoint, stopping early and handling a stuck run, and the
wiring from those flags to the driver (`training.monitoring`).

    step = finetuning.train(driver, make_task, evaluate, num_classes=2, main_metric="eval_accuracy")
    ...
    result, predicted = evaluate(step)
    finetuning.write_results(driver, result, predicted, path)
"""

import re
import sys
from collections.abc import Callable, Sequence

from absl import flags

from bert_realformer.errors import InputError

PER_KIND_METRIC = re.compile(r".+_(precision|recall|f1|support)$")  # a class's or an entity type's


def define_monitoring_flags():
    flags.DEFINE_integer("eval_every_steps", 0, "With --do_train: evaluate on the dev set (what --do_eval reads) "
                         "every N steps and at the end, into OUTPUT_DIR/eval_history.jsonl and TensorBoard, keeping "
                         "the best checkpoint in OUTPUT_DIR/best/ (--keep_best_by). 0: no evaluation during training.",
                         lower_bound=0)
    flags.DEFINE_string("keep_best_by", None, "With --eval_every_steps: the metric that picks the best checkpoint "
                        "(default: the task's main metric, e.g. eval_accuracy or f1); a loss (`loss`, `eval_loss`) "
                        "is minimised, any other metric maximised.")
    flags.DEFINE_integer("early_stopping_patience", 0, "With --eval_every_steps: stop training after K evaluations in "
                         "a row without a better --keep_best_by. 0: never.", lower_bound=0)
    flags.DEFINE_bool("use_best_checkpoint", True, "--do_eval, --do_predict and --export_dir use OUTPUT_DIR/best/ when "
                      "the run kept one (false: the weights training ended with).")
    flags.DEFINE_enum("on_stuck", "warn", ["warn", "restart"],
                      "A run whose training loss stays at ln K (K classes: it learns nothing) over 40% of the "
                      "steps after warm-up: warn (one line), or restart from the initial checkpoint with the next "
                      "--seed, at most --max_restarts times.")
    flags.DEFINE_integer("max_restarts", 3, "--on_stuck=restart: restarts at most.", lower_bound=0)


def check_monitoring_flags(dev_set: bool, dev_flags: str, known_metrics: Sequence[str]):
    """One-line errors for the monitoring flags. `dev_set`: whether the run reads a dev set
    (`dev_flags` says how to give one); `known_metrics`: what the task's evaluation reports
    (besides per-class or per-type precision/recall/f1/support)."""
    FLAGS = flags.FLAGS
    if FLAGS.eval_every_steps and not FLAGS.do_train:
        raise InputError("--eval_every_steps evaluates during training: it needs --do_train")
    if FLAGS.eval_every_steps and not dev_set:
        raise InputError(f"--eval_every_steps needs a dev set to evaluate on: {dev_flags}")
    for name in ("keep_best_by", "early_stopping_patience"):
        if getattr(FLAGS, name) and not FLAGS.eval_every_steps:
            raise InputError(f"--{name} needs --eval_every_steps (evaluations during training)")
    metric = best_metric(FLAGS.keep_best_by, known_metrics)
    if metric not in known_metrics and not PER_KIND_METRIC.match(metric):
        raise InputError(f"--keep_best_by={FLAGS.keep_best_by}: the evaluation does not report it; it reports "
                         f"{', '.join(known_metrics)} (and per-class or per-type precision, recall, f1)")


def best_metric(keep_best_by: str | None, known_metrics: Sequence[str]) -> str:
    """The metric that picks the best checkpoint: `keep_best_by` (`loss` meaning `eval_loss`),
    else the task's main metric (the first of `known_metrics`)."""
    if not keep_best_by:
        return known_metrics[0]
    if keep_best_by == "loss" and "eval_loss" in known_metrics:
        return "eval_loss"
    return keep_best_by


def train(driver, make_task: Callable, evaluate: Callable | None, *, known_metrics: Sequence[str],
          num_classes: int | None, label_names: Sequence[str] | None = None,
          shown: tuple[str, ...] | None = None) -> int:
    """Trains `make_task(seed)` under the monitoring flags (evaluations, best checkpoint, early
    stopping, the stuck check and restarts); returns the step of the weights the model then
    holds: the best checkpoint's when the run kept one (and --use_best_checkpoint), else the
    last step. `evaluate(step) -> (result, predicted classes or None)` evaluates the dev set."""
    from bert_realformer.training.best_checkpoint import Selection
    from bert_realformer.training.monitoring import monitored
    FLAGS = flags.FLAGS
    selection = Selection.by(best_metric(FLAGS.keep_best_by, known_metrics),
                             patience=FLAGS.early_stopping_patience or None)

    def monitored_task(seed):
        task = make_task(seed)
        print(task.summary, file=sys.stderr)
        return monitored(task, evaluate, num_classes=num_classes, label_names=label_names,
                         every_steps=FLAGS.eval_every_steps, selection=selection, shown=shown)

    step = driver.train_restarting(monitored_task)
    return driver.use_best(step) if FLAGS.use_best_checkpoint else step


def restore(driver) -> int:
    """An eval/predict-only run's weights: the run's best checkpoint when it kept one (and
    --use_best_checkpoint), else the weights policy's choice; returns their step."""
    return driver.restore_for_inference(prefer_best=flags.FLAGS.use_best_checkpoint)


def write_results(driver, result: dict, predicted, path: str, label_names: Sequence[str] | None = None,
                  shown: Sequence[str] = ()) -> None:
    """eval_results.txt of the final evaluation, with the run's seed and restarts when it
    restarted; a warning line when every example got one class; the `shown` metrics printed."""
    from bert_realformer import report
    from bert_realformer.training import recorded_options
    from bert_realformer.training.results import write_eval_results
    from bert_realformer.training.stuck import constant_prediction
    restarts = recorded_options.read(driver.write_dir).get("restarts") or []
    if restarts:
        result = {**result, "seed": driver.options.seed, "restarts": len(restarts)}
    write_eval_results(result, path)
    said = None if predicted is None else constant_prediction(predicted, label_names)
    if said:
        report.say(f"warning: {said}: the model predicts one class for everything (stuck? another --seed or a "
                   "lower --learning_rate usually helps)")
    for key in shown:
        if key in result:
            print(f"  {key} = {result[key]}", file=sys.stderr)
