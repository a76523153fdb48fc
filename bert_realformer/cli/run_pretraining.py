"""MLM + NSP pretraining, as the original run_pretraining.py, on one CPU/GPU, several GPUs,
several machines or a TPU; MLM alone with --no_nsp; records made with
create_pretraining_data.py --dynamic_masking are masked anew as they are read.

    python run_pretraining.py --bert_config_file=bert_config.json --input_file=data/*.tfrecord \\
      --output_dir=out --do_train --do_eval --train_batch_size=32 --max_seq_length=128 \\
      --max_predictions_per_seq=20 --num_train_steps=10000 --num_warmup_steps=1000 \\
      --learning_rate=1e-4 [--init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt]

Training state (weights, optimizer slots, step) is checkpointed to OUTPUT_DIR/training_state/
every --save_checkpoints_steps; a restarted run resumes from there. At the end, OUTPUT_DIR gets
a TF1 name-based `model.ckpt-STEP` (what the original writes, and what --init_checkpoint of the
fine-tuning scripts reads), and --do_eval writes OUTPUT_DIR/eval_results.txt. With
--eval_every_steps=N --eval_input_file=HELD_OUT, training evaluates the held-out records every N
steps into OUTPUT_DIR/eval_history.jsonl (one JSON object per step; a resumed run neither
repeats nor misses a point) and TensorBoard's OUTPUT_DIR/eval/, starting with step 0 (the model
the run starts from).
"""

import os
import sys

from absl import flags

from bert_realformer import storage, tfrecords
from bert_realformer.commandline import training_flags
from bert_realformer.commandline.model_files import complete_model_files
from bert_realformer.commandline.runner import require_flags, script_entry
from bert_realformer.commandline.training_flags import (
    define_model_file_flags,
    define_shared_flags,
    run_options,
    strategy_spec,
)
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS

# The original's flags.
define_model_file_flags(vocabulary=False)
flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after WordPiece tokenization. "
                     "Must match the data.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence. Must match "
                     "the data.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training (over all replicas, per micro-batch).")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
# Ours.
flags.DEFINE_bool("check_input_files", False, "Check the framing and CRCs of every record of every input file "
                  "before training (a damaged file is also named when training meets it).")
flags.DEFINE_integer("eval_every_steps", 0, "With --do_train: evaluate on --eval_input_file every N steps (and at the "
                     "last step) into OUTPUT_DIR/eval_history.jsonl and TensorBoard's eval/; 0: never.")
flags.DEFINE_string("eval_input_file", None, "Held-out TF example files (a glob or comma separated) for "
                    "--eval_every_steps and --do_eval (default for --do_eval: --input_file, as the original).")
flags.DEFINE_bool("no_nsp", False, "MLM-only pretraining (as RoBERTa and chinese-roberta-wwm-ext): no next-sentence "
                  "head, no NSP loss or metrics; the records need no next_sentence_labels.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Unmasked records (create_pretraining_data.py --dynamic_masking): the share "
                   "of tokens to predict, at most --max_predictions_per_seq per sequence. Masked records keep "
                   "the masks they were made with.")
flags.DEFINE_bool("train_heads_only", False, "Train the pretraining heads (cls/) alone, the encoder frozen (bert/, the "
                  "word embeddings the MLM output shares included): for a checkpoint released without its MLM head "
                  "(a Sentence-Transformers model), whose MLM accuracy means nothing until a head is fitted to it.")
flags.DEFINE_integer("head_fit_steps", 400, "--init_checkpoint without its MLM head (cls/predictions; a "
                     "Sentence-Transformers model): first fit one on the frozen encoder for this many steps (at "
                     "learning rate 1e-3) into OUTPUT_DIR/head_fit/, then continue from there, so that the step-0 "
                     "point means something. 0: train the head from scratch with the encoder.")
flags.DEFINE_integer("residual_attention_warmup_steps", 0, "Continuing a Post-LN checkpoint as RealFormer: weigh the "
                     "scores each layer is handed by a factor rising linearly from 0 at step 0 (the checkpoint "
                     "itself) to 1 at step N (the plain RealFormer, which model.ckpt-N holds); at most "
                     "--num_train_steps. 0: RealFormer from step 0 (docs/continued-pretraining.md, \"The warm "
                     "start\").")
define_shared_flags(pld=True)
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull
require_flags("input_file", "output_dir")


def _check_flags():
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise InputError("at least one of --do_train or --do_eval must be true")
    if FLAGS.eval_every_steps and not FLAGS.eval_input_file:
        raise InputError("--eval_every_steps needs --eval_input_file (held-out TFRecords)")
    if FLAGS.residual_attention_warmup_steps and not FLAGS.do_train:
        raise InputError("--residual_attention_warmup_steps is a training option: give --do_train")
    if FLAGS.residual_attention_warmup_steps > FLAGS.num_train_steps:
        raise InputError(f"--residual_attention_warmup_steps={FLAGS.residual_attention_warmup_steps}: at most "
                         f"--num_train_steps={FLAGS.num_train_steps}, else the run ends inside the warm-up, with a "
                         "model no checkpoint holds")
    complete_model_files()
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")


def _check_warm_start(config):
    """The warm start asks for a RealFormer model; a RealFormer run from another variant's
    checkpoint without it is told, in one line, what its step 0 is."""
    from bert_realformer.training.recorded_config import config_beside
    warmup = FLAGS.residual_attention_warmup_steps
    if warmup and not config.variant.is_realformer:
        raise InputError(f"--residual_attention_warmup_steps={warmup}: the model is {config.variant.name}, "
                         "which carries no attention scores; give --residual_attention=sum or mean",
                         options=("residual_attention_warmup_steps", "residual_attention"))
    if warmup or not FLAGS.do_train or not FLAGS.init_checkpoint or not config.variant.is_realformer:
        return
    recorded = config_beside(FLAGS.init_checkpoint)
    if recorded is None or not recorded.variant.is_realformer:
        print(f"warning: --init_checkpoint read as {config.variant.name} is another function than the "
              "checkpoint at step 0 (layer l softmaxes the scores of l + 1 layers); "
              "--residual_attention_warmup_steps=N starts from the checkpoint itself "
              "(docs/continued-pretraining.md, \"The warm start\")", file=sys.stderr)


def _fit_missing_head(strategy, config, files, layout, masking):
    """--init_checkpoint's encoder with an MLM head fitted to it (`pretraining.head_fit`): the
    checkpoint the run continues from."""
    import modeling
    from bert_realformer.pretraining import head_fit
    from bert_realformer.pretraining.task import pretraining_task
    from bert_realformer.training.driver import Driver
    from bert_realformer.training.recorded_config import config_beside
    from bert_realformer.training.setup import for_worker
    from modeling.variants import Variant
    steps, directory = FLAGS.head_fit_steps, head_fit.head_fit_dir(FLAGS.output_dir)
    done = head_fit.fitted(FLAGS.output_dir, steps)
    if done:
        print(f"--init_checkpoint's missing MLM head was fitted in {directory}: continuing from {done}",
              file=sys.stderr)
        return done
    print(f"--init_checkpoint has no MLM head (cls/predictions): fitting one on the frozen encoder for {steps} "
          f"steps first, into {directory} (--head_fit_steps; 0: train it with the encoder from step 0)",
          file=sys.stderr)
    recorded = config_beside(FLAGS.init_checkpoint)  # (the head fits the function the checkpoint computes)
    released = config.replace(**(recorded.variant if recorded else Variant()).config_keys())

    def build_model():
        model = modeling.BertPretrainer(released, next_sentence=not FLAGS.no_nsp)
        modeling.freeze_encoder(model)
        return model

    options = for_worker(run_options(directory, FLAGS.init_checkpoint), strategy, training=True)
    with Driver(strategy, build_model, options) as driver:
        driver.train(pretraining_task(
            files, FLAGS.train_batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            head_fit.HEAD_FIT_LEARNING_RATE, steps, max(1, steps // 10), seed=FLAGS.seed,
            next_sentence=not FLAGS.no_nsp, layout=layout, masking=masking))
    return os.path.join(directory, f"model.ckpt-{steps}")


def main(argv):
    del argv
    _check_flags()
    import modeling
    from bert_realformer.checkpoints import training_states
    from bert_realformer.pretraining import head_fit
    from bert_realformer.pretraining.dynamic_masking import DynamicMasking
    from bert_realformer.pretraining.input_pipeline import check_records, expand_input_files
    from bert_realformer.pretraining.task import evaluate, pretraining_task
    from bert_realformer.training.driver import Driver
    from bert_realformer.training.evaluation import PeriodicEval, once_per_step, write_eval_results
    from bert_realformer.training.setup import check_batches_fit, for_worker, load_config
    from bert_realformer.training.state_dependencies import StateDependencies, check_unchanged
    depends_on = {"train_heads_only": FLAGS.train_heads_only, "no_nsp": FLAGS.no_nsp}
    check_unchanged(FLAGS.output_dir, depends_on, training=FLAGS.do_train)  # (before the data is read)
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.layer_norm_type, FLAGS.residual_attention)
    _check_warm_start(config)
    files = expand_input_files(FLAGS.input_file)
    eval_files = expand_input_files(FLAGS.eval_input_file, "eval_input_file") if FLAGS.eval_input_file else files
    strategy = strategy_spec().make()  # multi-worker collectives: before TensorFlow runs any op
    check_batches_fit(config, FLAGS.max_seq_length, strategy.num_replicas_in_sync,
                      {"train_batch_size": FLAGS.train_batch_size, "eval_batch_size": FLAGS.eval_batch_size},
                      FLAGS.max_predictions_per_seq)
    layout = check_records(sorted({*files, *eval_files}), FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                           config.vocab_size, next_sentence=not FLAGS.no_nsp)
    masking = DynamicMasking(FLAGS.masked_lm_prob, FLAGS.max_predictions_per_seq, config.vocab_size, FLAGS.seed)
    if layout.unmasked:
        print(f"records are unmasked: masking {FLAGS.masked_lm_prob:g} of the tokens as they are read "
              f"(at most {FLAGS.max_predictions_per_seq} per sequence)", file=sys.stderr)
    if FLAGS.check_input_files:
        tfrecords.check_files(files, "input_file")
        print(f"checked every record of {len(files)} input files", file=sys.stderr)
    if FLAGS.init_checkpoint:
        training_states.resolve(FLAGS.init_checkpoint)  # exists?
    if FLAGS.train_batch_size % strategy.num_replicas_in_sync:
        raise InputError(f"--train_batch_size={FLAGS.train_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")
    init_checkpoint = FLAGS.init_checkpoint
    if (FLAGS.do_train and init_checkpoint and FLAGS.head_fit_steps and not FLAGS.train_heads_only
            and not head_fit.resuming(FLAGS.output_dir) and head_fit.lacks_mlm_head(init_checkpoint)):
        init_checkpoint = _fit_missing_head(strategy, config, files, layout, masking)
    options = for_worker(run_options(FLAGS.output_dir, init_checkpoint), strategy, training=FLAGS.do_train)

    def build_model():
        model = modeling.BertPretrainer(config, next_sentence=not FLAGS.no_nsp)
        if FLAGS.train_heads_only:
            trainable = modeling.freeze_encoder(model)
            print(f"--train_heads_only: {trainable:,} weights of the heads train, the encoder is frozen",
                  file=sys.stderr)
        return model

    driver = Driver(strategy, build_model, options)

    @once_per_step
    def held_out_eval(step):
        option = "eval_input_file" if FLAGS.eval_input_file else "input_file"
        with tfrecords.naming_damaged_file(eval_files, option, options=(option,)):
            return evaluate(driver, eval_files, FLAGS.eval_batch_size, FLAGS.max_seq_length,
                            FLAGS.max_predictions_per_seq, FLAGS.max_eval_steps, step, layout, masking)

    with driver:  # (its claim on the output directory released however the run ends)
        if FLAGS.do_train:
            task = pretraining_task(
                files, FLAGS.train_batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps, seed=FLAGS.seed,
                pld_options=(FLAGS.pld_theta, FLAGS.pld_gamma) if FLAGS.pld else None,
                next_sentence=not FLAGS.no_nsp, layout=layout, masking=masking)
            hooks = [StateDependencies(depends_on)]
            if FLAGS.eval_every_steps:
                hooks.append(PeriodicEval(FLAGS.eval_every_steps, held_out_eval))
            if FLAGS.residual_attention_warmup_steps:
                from bert_realformer.training.residual_attention_warmup import ResidualAttentionWarmup
                hooks.insert(1, ResidualAttentionWarmup(FLAGS.residual_attention_warmup_steps))
            step = driver.train(task, hooks)
        if FLAGS.do_eval and options.is_chief:
            if not FLAGS.do_train:
                step = driver.restore_for_inference()
            result = held_out_eval(step)
            write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
            for key in sorted(result):
                print(f"  {key} = {result[key]}", file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-run-pretraining`

if __name__ == "__main__":
    entry()
