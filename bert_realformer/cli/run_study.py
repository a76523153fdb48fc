"""Post-LN vs Pre-LN vs RealFormer as one command: variants x seeds, each pretrained with held-out
evaluation, its attention analysed, and fine-tuned on every downstream task; then the results
aggregated over seeds with paired differences and error bars.

    python run_study.py --output_dir=study --variants=post-LN,pre-LN,RealFormer --seeds=1,2,3 \\
      --bert_config_file=base_config.json --vocab_file=vocab.txt \\
      --input_file=train.tfrecord --eval_input_file=heldout.tfrecord \\
      --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=32 \\
      --num_train_steps=10000 --num_warmup_steps=1000 --learning_rate=1e-4 --eval_every_steps=1000 \\
      --task="sentiment=run_classifier.py --task_name=thucnews --data_dir=data/sentiment --num_train_epochs=2"

Each run is one of the project's scripts, printed as a user would type it, in its own directory
(OUTPUT_DIR/runs/<variant>/seed-<seed>/<pretraining|attention|task>/). Running the command again
re-uses finished runs and resumes unfinished ones. --init_checkpoint continues every variant
from the same released checkpoint (its step 0 is that checkpoint read as the variant; report.md
says how far each starts below post-LN and when it catches up); --released_baseline also
fine-tunes from the checkpoint itself. The same seed gives every variant the same initial weights
(where shapes agree), data order and dropout, so differences pair by seed.

Writes OUTPUT_DIR/results.json (every run's metrics; per variant and metric the mean, std and n;
paired differences to post-LN with 95% confidence intervals; baselines) and OUTPUT_DIR/report.md
with mlm_accuracy.png, attention_entropy.png and attention_jsd.png.
"""

import json
import os
import sys
import time

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline.runner import script_entry
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "The study's directory: runs, results.json, report.md.")
flags.DEFINE_list("variants", ["post-LN", "pre-LN", "RealFormer"],
                  "Variants to compare: post-LN, pre-LN, RealFormer, RealFormer-mean; RealFormer+warmup and "
                  "RealFormer-mean+warmup continue --init_checkpoint with --residual_attention_warmup_steps "
                  "(+warmupN: with N steps, e.g. RealFormer+warmup1000 beside RealFormer+warmup).")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Seeds (integers); each runs every variant.")
flags.DEFINE_string("bert_config_file", None, "The base config; each variant sets layer_norm_type and "
                    "residual_attention on it.")
flags.DEFINE_string("vocab_file", None, "The vocabulary of the model (for the downstream tasks).")
flags.DEFINE_string("input_file", None, "Pretraining TFRecords (a glob or comma separated).")
flags.DEFINE_string("eval_input_file", None, "Held-out pretraining TFRecords: evaluation and attention analysis.")
flags.DEFINE_string("init_checkpoint", None, "Continue every variant from this checkpoint (e.g. a released BERT).")
flags.DEFINE_bool("released_baseline", False, "With --init_checkpoint: also fine-tune every task from that checkpoint "
                  "itself, without continued pretraining (the variant `released` in the tables, each variant compared "
                  "with it as with post-LN), and analyse its attention.")
flags.DEFINE_integer("residual_attention_warmup_steps", 0, "The +warmup variants (RealFormer+warmup, "
                     "RealFormer-mean+warmup): their pretraining runs' --residual_attention_warmup_steps (the "
                     "warm start from --init_checkpoint).")
flags.DEFINE_integer("max_seq_length", 128, "As run_pretraining.py; must match the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "As run_pretraining.py; must match the records.")
flags.DEFINE_integer("train_batch_size", 32, "Pretraining batch size.")
flags.DEFINE_integer("num_train_steps", 10000, "Pretraining steps.")
flags.DEFINE_integer("num_warmup_steps", 1000, "Pretraining warmup steps.")
flags.DEFINE_float("learning_rate", 1e-4, "Pretraining learning rate.")
flags.DEFINE_integer("eval_every_steps", 1000, "Held-out evaluation every N pretraining steps (the curves).")
flags.DEFINE_integer("max_eval_steps", 100, "Held-out batches per evaluation.")
flags.DEFINE_integer("eval_batch_size", 32, "Held-out evaluation batch size.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Pretraining training-state checkpoints (resume points).")
flags.DEFINE_list("pretraining_flags", [], "More run_pretraining.py flags for every variant, comma separated "
                  "(e.g. --use_xla,--iterations_per_loop=100).")
flags.DEFINE_multi_string("task", [], "A downstream task, NAME=SCRIPT --flag=value ... (repeatable); the study "
                          "adds --bert_config_file, --vocab_file, --init_checkpoint, --output_dir, --seed and "
                          "--do_train --do_eval.")
flags.DEFINE_integer("attention_examples", 256, "Held-out examples for the attention analysis.")
flags.DEFINE_float("time_budget_minutes", 0, "Fit the study into about this many minutes on this machine: before "
                   "the first run it times the pretraining step here and, when the study as asked would take longer, "
                   "runs fewer epochs of each task (down to half), then fewer pretraining steps (and warm-up), "
                   "saying so (recorded in OUTPUT_DIR/sizing.json, kept when the study runs again); a stuck "
                   "fine-tuning run restarts (--on_stuck=restart) only while the budget has room for it "
                   "(--restart_deadline). 0: as asked.")
flags.DEFINE_float("time_budget_start", 0, "The Unix time --time_budget_minutes counts from, when it began before "
                   "this command (e.g. `date +%s` before preparing the study's data); 0: when this command started.")
flags.DEFINE_string("description", "", "Sentences describing the study's data, for report.md (the model's size and "
                    "schedule are described already).")


def _check_flags():
    from bert_realformer.comparison.plan import check_variants
    for name in ("output_dir", "bert_config_file", "vocab_file", "input_file", "eval_input_file"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    check_variants(FLAGS.variants, FLAGS.residual_attention_warmup_steps)
    try:
        seeds = [int(s) for s in FLAGS.seeds]
    except ValueError:
        raise InputError(f"--seeds={','.join(FLAGS.seeds)}: expected integers, e.g. --seeds=1,2,3") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError("--seeds: give at least one seed, none twice")
    if FLAGS.eval_every_steps < 1:  # (0, which a pretraining run takes as "never", is no study)
        raise InputError(f"--eval_every_steps={FLAGS.eval_every_steps}: must be at least 1")
    for path, flag in ((FLAGS.bert_config_file, "--bert_config_file"), (FLAGS.vocab_file, "--vocab_file")):
        if not storage.isfile(path):
            raise InputError(f"{flag}={path}: no such file")
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")
    return seeds


def _base_config():
    try:
        config = json.loads(read_text(FLAGS.bert_config_file))
    except json.JSONDecodeError as error:
        raise InputError(f"--bert_config_file={FLAGS.bert_config_file}: not JSON ({error})") from None
    if not isinstance(config, dict):
        raise InputError(f"--bert_config_file={FLAGS.bert_config_file}: expected a JSON object")
    return config


def build_plan(seeds, sizing=None):
    """The study's plan; with `sizing` (`comparison.sizing.Sizing`), its shares of the steps and epochs, and
    the --restart_deadline of each task run that restarts when stuck."""
    from bert_realformer.comparison.plan import DownstreamTask, StudyPlan
    steps, warmup = FLAGS.num_train_steps, FLAGS.num_warmup_steps
    if sizing is not None:
        steps, warmup = sizing.scaled_steps(steps), sizing.scaled_steps(warmup)
    pretraining = [f"--input_file={FLAGS.input_file}", f"--eval_input_file={FLAGS.eval_input_file}",
                   f"--max_seq_length={FLAGS.max_seq_length}",
                   f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
                   f"--train_batch_size={FLAGS.train_batch_size}", f"--num_train_steps={steps}",
                   f"--num_warmup_steps={warmup}", f"--learning_rate={FLAGS.learning_rate}",
                   f"--eval_every_steps={FLAGS.eval_every_steps}", f"--max_eval_steps={FLAGS.max_eval_steps}",
                   f"--eval_batch_size={FLAGS.eval_batch_size}",
                   f"--save_checkpoints_steps={FLAGS.save_checkpoints_steps}", *FLAGS.pretraining_flags]
    tasks = [DownstreamTask.parse(spec) for spec in FLAGS.task]
    if sizing is not None:
        tasks = [sizing.scaled_task(task) for task in tasks]
    if len({t.name for t in tasks}) != len(tasks):
        raise InputError("--task: two tasks have the same name")
    plan = StudyPlan(output_dir=FLAGS.output_dir, variants=tuple(FLAGS.variants), seeds=tuple(seeds),
                     base_config=_base_config(), pretraining_flags=pretraining,
                     num_train_steps=steps, tasks=tasks, vocab_file=FLAGS.vocab_file,
                     attention_input=FLAGS.eval_input_file, attention_examples=FLAGS.attention_examples,
                     init_checkpoint=FLAGS.init_checkpoint, released_baseline=FLAGS.released_baseline,
                     residual_attention_warmup_steps=FLAGS.residual_attention_warmup_steps)
    if sizing is not None:
        from bert_realformer.comparison.sizing import restart_deadlines
        plan.restart_deadlines = restart_deadlines(sizing, plan.runs(), FLAGS.num_train_steps, len(tasks))
    return plan


def _pretraining_flag_value(name, default):
    """The value --pretraining_flags gives run_pretraining.py's --NAME, else `default`."""
    given = [flag.split("=", 1)[1] for flag in FLAGS.pretraining_flags if flag.startswith(f"--{name}=")]
    return type(default)(given[-1]) if given else default


def _baselines(plan):
    """The no-model baselines, computed once per study directory (baselines.json)."""
    from bert_realformer.comparison import baselines
    path = os.path.join(plan.output_dir, "baselines.json")
    if storage.exists(path):
        return json.loads(read_text(path))
    from bert_realformer.pretraining.input_pipeline import expand_input_files
    result = {"pretraining": baselines.pretraining_baselines(
        expand_input_files(FLAGS.input_file), expand_input_files(FLAGS.eval_input_file, "eval_input_file"),
        FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, FLAGS.max_eval_steps * FLAGS.eval_batch_size,
        _pretraining_flag_value("masked_lm_prob", 0.15))}
    for task in plan.tasks:
        found = baselines.classifier_baselines(task)
        if found:
            result[task.name] = found
    storage.write_atomic(path, json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result


def main(argv):
    del argv
    seeds = _check_flags()
    from bert_realformer import optional
    optional.require("matplotlib", "run_study.py's plots")  # (before the runs, not after them)
    from bert_realformer.comparison.execution import RunFailed, execute_plan
    from bert_realformer.comparison.report import write_report
    from bert_realformer.comparison.results import aggregate, collect, stuck_runs, write_results
    started = time.time()
    plan = build_plan(seeds)
    if FLAGS.time_budget_minutes:
        from bert_realformer.comparison.sizing import size
        sizing = size(plan, FLAGS.time_budget_minutes, FLAGS.time_budget_start or started)
        plan = build_plan(seeds, sizing)
        shrunk = " (without --time_budget_minutes: the whole study)" if sizing.shrunk else ""
        print(sizing.line(FLAGS.num_train_steps) + shrunk, flush=True)
    baselines = _baselines(plan)
    try:
        ran = execute_plan(plan)
    except RunFailed as failure:
        raise InputError(f"{failure}; fix it and run the same command again to go on") from None
    rows = collect(plan)
    summary = aggregate(rows, plan.compared)
    stuck = stuck_runs(plan)
    write_results(plan, rows, summary, baselines, os.path.join(plan.output_dir, "results.json"), stuck)
    description = (
        f"A BERT of {plan.base_config.get('num_hidden_layers')} layers, hidden {plan.base_config.get('hidden_size')}, "
        f"pretrained {plan.num_train_steps} steps (batch {FLAGS.train_batch_size}, sequence length "
        f"{FLAGS.max_seq_length}, learning rate {FLAGS.learning_rate:g}). {FLAGS.description}").strip()
    write_report(plan, rows, summary, baselines, os.path.join(plan.output_dir, "report.md"), description, stuck)
    print(f"{ran} runs ran, {len(plan.runs()) - ran} re-used; wrote {plan.output_dir}/results.json and "
          f"{plan.output_dir}/report.md ({time.time() - started:.0f} s)", file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-run-study`

if __name__ == "__main__":
    entry()
