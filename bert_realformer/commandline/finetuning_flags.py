"""What every fine-tuning script shares around its task: the checks of the flags for evaluating
on the dev set during training, keeping the best checkpoint, stopping early and handling a stuck
run (`training_flags.define_monitoring_flags`), and the wiring from the flags to the one
fine-tuning flow (`finetuning.flow`).

    task = registry.get("ner")(finetuning.task_options(), data_dir=FLAGS.data_dir, ...)
    flow.run(task)
"""

import re
from collections.abc import Sequence

from absl import flags

from bert_realformer.commandline.training_flags import adversary_from_flags, run_options, strategy_spec
from bert_realformer.errors import InputError

PER_KIND_METRIC = re.compile(r".+_(precision|recall|f1|support)$")  # a class's or an entity type's
# The flags (those a script has) a fine-tuning run's training state depends on, besides the
# vocabulary's content (`training.state_dependencies`): its token ids, examples and schedule.
STATE_FLAGS = ("do_lower_case", "max_seq_length", "truncation", "doc_stride", "window_training",
               "max_windows_per_document", "max_query_length")


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
    from bert_realformer.finetuning.contract import best_metric
    metric = best_metric(FLAGS.keep_best_by, known_metrics)
    if metric not in known_metrics and not PER_KIND_METRIC.match(metric):
        raise InputError(f"--keep_best_by={FLAGS.keep_best_by}: the evaluation does not report it; it reports "
                         f"{', '.join(known_metrics)} (and per-class or per-type precision, recall, f1)")


def plan_from_flags(export_dir: str | None = None):
    """The fine-tuning `Plan` the flags ask for."""
    adversary, lora = adversary_from_flags(), lora_from_flags()  # (their flags checked before TensorFlow starts)
    from bert_realformer.finetuning.flow import Plan
    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.training import state_dependencies
    FLAGS = flags.FLAGS
    schedule = Schedule(FLAGS.train_batch_size, FLAGS.learning_rate, FLAGS.num_train_epochs, FLAGS.warmup_proportion,
                        FLAGS.gradient_accumulation_steps, FLAGS.seed, FLAGS.shuffle_buffer_size)
    return Plan(do_train=FLAGS.do_train, do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict, schedule=schedule,
                eval_every_steps=FLAGS.eval_every_steps, keep_best_by=FLAGS.keep_best_by,
                early_stopping_patience=FLAGS.early_stopping_patience, use_best_checkpoint=FLAGS.use_best_checkpoint,
                export_dir=export_dir, on_stuck=FLAGS.on_stuck, max_restarts=FLAGS.max_restarts,
                restart_deadline=FLAGS.restart_deadline,
                layerwise_lr_decay=FLAGS.layerwise_lr_decay, reinit_top_layers=FLAGS.reinit_top_layers,
                ema_decay=FLAGS.ema_decay, adversary=adversary, lora=lora,
                state_depends_on=state_dependencies.values(
                    {name: FLAGS[name].value for name in STATE_FLAGS if name in FLAGS}, FLAGS.vocab_file))


def lora_from_flags():
    """The `finetuning.low_rank_adaptation.Lora` of --lora_rank, --lora_alpha, --lora_targets (None: rank 0)."""
    FLAGS = flags.FLAGS
    if not FLAGS.lora_rank:
        for name in ("lora_alpha", "lora_targets"):
            if FLAGS[name].present:
                raise InputError(f"--{name}={FLAGS[name].serialize().split('=', 1)[1]} is LoRA's: it needs "
                                 "--lora_rank=R")
        return None
    from bert_realformer.finetuning.low_rank_adaptation import Lora
    return Lora(FLAGS.lora_rank, FLAGS.lora_alpha or None, tuple(FLAGS.lora_targets))


def finetuning_options(export_dir: str | None = None):
    """The run's one `flow.FinetuningOptions`, from the flags: the plan, the tasks' options and
    what the driver is made from (`export_dir`: where the run exports its SavedModel)."""
    plan = plan_from_flags(export_dir)  # (its flags checked before the flow imports TensorFlow)
    from bert_realformer.finetuning.flow import DriverSetup, FinetuningOptions
    FLAGS = flags.FLAGS
    batches = tuple((name, FLAGS[name].value) for name in ("train_batch_size", "eval_batch_size",
                                                           "predict_batch_size") if name in FLAGS)
    setup = DriverSetup(bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
                        max_seq_length=FLAGS.max_seq_length, run=run_options(FLAGS.output_dir, FLAGS.init_checkpoint),
                        do_lower_case=FLAGS.do_lower_case, layer_norm_type=FLAGS.layer_norm_type,
                        residual_attention=FLAGS.residual_attention, strategy=strategy_spec(), batches=batches,
                        allow_foreign_vocab=FLAGS.allow_foreign_vocab)
    return FinetuningOptions(plan=plan, task=task_options(), setup=setup)


def run(task, options) -> None:
    """Runs the fine-tuning `task` (a `finetuning.contract.FinetuningTask`) with the run's
    `FinetuningOptions` (`finetuning_options`)."""
    from bert_realformer.finetuning import flow
    from bert_realformer.training.state_dependencies import check_unchanged
    check_unchanged(flags.FLAGS.output_dir, options.plan.state_depends_on, options.plan.do_train,
                    flags.FLAGS.vocab_file)  # (before the data is read: a refused run writes nothing)
    flow.run(task, options.plan, options.make_driver)


def task_options():
    """The `TaskOptions` of the shared fine-tuning flags."""
    from bert_realformer.finetuning.contract import TaskOptions
    FLAGS = flags.FLAGS
    # (run_squad.py predicts its dev set with --predict_batch_size, as the original)
    eval_batch_size = FLAGS["eval_batch_size"].value if "eval_batch_size" in FLAGS else FLAGS.predict_batch_size
    return TaskOptions(output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
                       eval_batch_size=eval_batch_size, predict_batch_size=FLAGS.predict_batch_size,
                       dynamic_padding=FLAGS.dynamic_padding)
