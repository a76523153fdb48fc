"""What every fine-tuning script shares around its task: the checks of the flags for evaluating
on the dev set during training, keeping the best checkpoint, stopping early and handling a stuck
run (`training_flags.define_monitoring_flags`), and the wiring from the flags to the one
fine-tuning flow (`tasks.finetuning`).

    task = registry.get("ner")(finetuning.task_options(), data_dir=FLAGS.data_dir, ...)
    finetuning.run(task)
"""

import re
from collections.abc import Sequence

from absl import flags

from bert_realformer.commandline.training_flags import finetuning_driver, schedule_from_flags
from bert_realformer.errors import InputError

PER_KIND_METRIC = re.compile(r".+_(precision|recall|f1|support)$")  # a class's or an entity type's


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
    from bert_realformer.tasks.finetuning import best_metric
    metric = best_metric(FLAGS.keep_best_by, known_metrics)
    if metric not in known_metrics and not PER_KIND_METRIC.match(metric):
        raise InputError(f"--keep_best_by={FLAGS.keep_best_by}: the evaluation does not report it; it reports "
                         f"{', '.join(known_metrics)} (and per-class or per-type precision, recall, f1)")


def plan_from_flags(export_dir: str | None = None):
    """The fine-tuning `Plan` the flags ask for."""
    from bert_realformer.tasks.finetuning import Plan
    FLAGS = flags.FLAGS
    return Plan(do_train=FLAGS.do_train, do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict,
                schedule=schedule_from_flags, eval_every_steps=FLAGS.eval_every_steps,
                keep_best_by=FLAGS.keep_best_by, early_stopping_patience=FLAGS.early_stopping_patience,
                use_best_checkpoint=FLAGS.use_best_checkpoint, export_dir=export_dir)


def run(task, export_dir: str | None = None, plan=None) -> None:
    """Runs the fine-tuning `task` (a `tasks.contract.FinetuningTask`) as the flags ask (or as
    `plan` says), with the driver and tokenizer they give (`training_flags.finetuning_driver`)."""
    from bert_realformer.tasks import finetuning
    finetuning.run(task, plan or plan_from_flags(export_dir), finetuning_driver)


def task_options():
    """The `TaskOptions` of the shared fine-tuning flags."""
    from bert_realformer.tasks.contract import TaskOptions
    FLAGS = flags.FLAGS
    # (run_squad.py predicts its dev set with --predict_batch_size, as the original)
    eval_batch_size = FLAGS["eval_batch_size"].value if "eval_batch_size" in FLAGS else FLAGS.predict_batch_size
    return TaskOptions(output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
                       eval_batch_size=eval_batch_size, predict_batch_size=FLAGS.predict_batch_size,
                       dynamic_padding=FLAGS.dynamic_padding)
