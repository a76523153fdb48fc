"""MLM + NSP pretraining, as the original run_pretraining.py, on one CPU/GPU, several GPUs,
several machines or a TPU.

    python run_pretraining.py --bert_config_file=bert_config.json --input_file=data/*.tfrecord \\
      --output_dir=out --do_train --do_eval --train_batch_size=32 --max_seq_length=128 \\
      --max_predictions_per_seq=20 --num_train_steps=10000 --num_warmup_steps=1000 \\
      --learning_rate=1e-4 [--init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt]

Training state (weights, optimizer slots, step) is checkpointed to OUTPUT_DIR/training_state/
every --save_checkpoints_steps; a restarted run resumes from there. At the end, OUTPUT_DIR gets
a TF1 name-based `model.ckpt-STEP` (what the original writes, and what --init_checkpoint of the
fine-tuning scripts reads), and --do_eval writes OUTPUT_DIR/eval_results.txt.
"""

import os
import sys
import time

from absl import flags

from cli import InputError, run
from training.flags import define_shared_flags, is_chief as _is_chief, load_config, strategy_from_flags

FLAGS = flags.FLAGS

# The original's flags.
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after WordPiece tokenization. Must match the data.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence. Must match the data.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training (over all replicas, per micro-batch).")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps between progress lines and summaries.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
define_shared_flags(pld=True)


def _check_flags():
    for name in ("bert_config_file", "input_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise InputError("at least one of --do_train or --do_eval must be true")
    for name in ("train_batch_size", "eval_batch_size", "max_seq_length", "max_predictions_per_seq",
                 "gradient_accumulation_steps", "save_checkpoints_steps", "iterations_per_loop",
                 "max_eval_steps"):
        if getattr(FLAGS, name) < 1:
            raise InputError(f"--{name}={getattr(FLAGS, name)}: must be at least 1")
    if FLAGS.num_train_steps < 0 or FLAGS.num_warmup_steps < 0:
        raise InputError("--num_train_steps and --num_warmup_steps must not be negative")
    if not 0 < FLAGS.pld_theta <= 1:
        raise InputError(f"--pld_theta={FLAGS.pld_theta}: must be in (0, 1]")


def _loss_fn(num_layers):
    from pretraining import pld
    from pretraining.losses import replica_pretraining_loss

    def loss_fn(model, features, training, step, totals):
        keep = (pld.keep_probabilities(step, num_layers, FLAGS.pld_theta, FLAGS.pld_gamma)
                if FLAGS.pld and training else None)
        return replica_pretraining_loss(model(features, training=training, layer_keep_probs=keep),
                                        features, totals)
    return loss_fn


def train(strategy, config, files, write_dir, is_chief):
    import tensorflow as tf

    import modeling
    from pretraining.input_pipeline import make_dataset
    from pretraining.losses import pretraining_totals
    from training.checkpointing import initialise, training_state
    from training.optimization import create_optimizer
    from training.trainer import TrainLoop, global_batch_slices

    replicas = strategy.num_replicas_in_sync
    if FLAGS.train_batch_size % replicas:
        raise InputError(f"--train_batch_size={FLAGS.train_batch_size} is not divisible by the "
                         f"{replicas} replicas")
    with strategy.scope():
        model = modeling.BertPretrainer(config)
        model.build()
        optimizer = create_optimizer(FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                                     FLAGS.optimizer, FLAGS.weight_decay)
        loop = TrainLoop(strategy, model, optimizer, _loss_fn(config.num_hidden_layers),
                         pretraining_totals, accumulation_steps=FLAGS.gradient_accumulation_steps,
                         loss_scaling=FLAGS.mixed_precision == "fp16", use_xla=FLAGS.use_xla)
    _, manager = training_state(model, optimizer, loop, write_dir, FLAGS.keep_checkpoint_max)
    if manager.restored:
        print(f"resuming from {manager.restored} at step {int(optimizer.iterations.numpy())}", file=sys.stderr)
    elif FLAGS.init_checkpoint:
        initialise(model, FLAGS.init_checkpoint)

    iterator = iter(strategy.distribute_datasets_from_function(lambda context: global_batch_slices(
        make_dataset(files, FLAGS.train_batch_size, FLAGS.max_seq_length,
                     FLAGS.max_predictions_per_seq, True, seed=FLAGS.seed),
        FLAGS.train_batch_size, context)))
    writer = tf.summary.create_file_writer(os.path.join(write_dir, "train")) if is_chief else None
    step = int(optimizer.iterations.numpy())
    examples_per_step = FLAGS.train_batch_size * FLAGS.gradient_accumulation_steps
    last_time, last_step = time.time(), step
    while step < FLAGS.num_train_steps:
        metrics = loop.train_step(iterator)
        step = int(optimizer.iterations.numpy())
        if writer is not None:
            with writer.as_default(step=step):
                for name, value in metrics.items():
                    tf.summary.scalar(name, value)
                tf.summary.scalar("learning_rate", optimizer.learning_rate)
        if step % FLAGS.iterations_per_loop == 0 or step == FLAGS.num_train_steps:
            now = time.time()
            rate = (step - last_step) / max(now - last_time, 1e-9)
            if writer is not None:
                with writer.as_default(step=step):
                    tf.summary.scalar("examples_per_second", rate * examples_per_step)
            print(f"step {step}/{FLAGS.num_train_steps}: loss {float(metrics['loss']):.4f} "
                  f"(mlm {float(metrics['masked_lm_loss']):.4f}, nsp {float(metrics['next_sentence_loss']):.4f}), "
                  f"{rate:.2f} steps/s, {rate * examples_per_step:.1f} examples/s", file=sys.stderr, flush=True)
            last_time, last_step = now, step
        if step % FLAGS.save_checkpoints_steps == 0 or step == FLAGS.num_train_steps:
            manager.save(checkpoint_number=step)
    if is_chief:
        prefix = modeling.save_tf1_checkpoint(model, os.path.join(write_dir, f"model.ckpt-{step}"))
        print(f"wrote {prefix}", file=sys.stderr)
    return model


def evaluate(strategy, config, files, model=None):
    """The original's eval metrics over --max_eval_steps batches -> dict."""
    import numpy as np
    import tensorflow as tf

    import modeling
    from pretraining.input_pipeline import make_dataset
    from training.checkpointing import latest_exported_step
    if model is None:
        with strategy.scope():
            model = modeling.BertPretrainer(config)
            model.build()
        from training.checkpointing import initialise
        initialise(model, FLAGS.output_dir if FLAGS.do_train or not FLAGS.init_checkpoint
                   else FLAGS.init_checkpoint)
    dataset = make_dataset(files, FLAGS.eval_batch_size, FLAGS.max_seq_length,
                           FLAGS.max_predictions_per_seq, False)

    @tf.function
    def eval_step(features):
        outputs = model(features, training=False)
        losses = modeling.pretraining_losses(outputs, features)
        mlm_pred = tf.argmax(outputs["masked_lm_log_probs"], axis=-1, output_type=tf.int32)
        nsp_pred = tf.argmax(outputs["next_sentence_log_probs"], axis=-1, output_type=tf.int32)
        return (losses["masked_lm_example_loss"], mlm_pred, losses["next_sentence_example_loss"], nsp_pred)

    sums = dict(mlm_correct=0.0, mlm_loss=0.0, mlm_weight=0.0, nsp_correct=0.0, nsp_loss=0.0, n=0, loss=0.0)
    for features in dataset.take(FLAGS.max_eval_steps):
        mlm_loss, mlm_pred, nsp_loss, nsp_pred = (np.asarray(t) for t in eval_step(features))
        w = features["masked_lm_weights"].numpy()
        labels = features["masked_lm_ids"].numpy()
        nsp_labels = features["next_sentence_labels"].numpy().reshape(-1)
        sums["mlm_correct"] += float(np.sum((mlm_pred == labels) * w))
        sums["mlm_loss"] += float(np.sum(mlm_loss * w))
        sums["mlm_weight"] += float(np.sum(w))
        sums["nsp_correct"] += float(np.sum(nsp_pred == nsp_labels))
        sums["nsp_loss"] += float(np.sum(nsp_loss))
        sums["n"] += len(nsp_labels)
    mlm_weight, n = max(sums["mlm_weight"], 1e-12), max(sums["n"], 1)
    result = {"masked_lm_accuracy": sums["mlm_correct"] / mlm_weight,
              "masked_lm_loss": sums["mlm_loss"] / mlm_weight,
              "next_sentence_accuracy": sums["nsp_correct"] / n,
              "next_sentence_loss": sums["nsp_loss"] / n}
    result["loss"] = result["masked_lm_loss"] + result["next_sentence_loss"]
    result["global_step"] = latest_exported_step(FLAGS.output_dir)
    return result


def main(argv):
    del argv
    _check_flags()
    import keras

    from pretraining.input_pipeline import check_record_lengths, expand_input_files
    from training.distribution import set_mixed_precision
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    files = expand_input_files(FLAGS.input_file)
    strategy = strategy_from_flags()  # multi-worker collectives: before TensorFlow runs any op
    check_record_lengths(files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
    if FLAGS.init_checkpoint:
        import modeling
        modeling.checkpoints.resolve_checkpoint_path(FLAGS.init_checkpoint)  # exists?
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    set_mixed_precision(FLAGS.mixed_precision)
    is_chief = _is_chief(strategy)
    write_dir = FLAGS.output_dir if is_chief else os.path.join(
        FLAGS.output_dir, f"worker_{strategy.cluster_resolver.task_id}")
    model = None
    if FLAGS.do_train:
        model = train(strategy, config, files, write_dir, is_chief)
    if FLAGS.do_eval and is_chief:
        result = evaluate(strategy, config, files, model)
        from training.results import write_eval_results
        write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
        for key in sorted(result):
            print(f"  {key} = {result[key]}", file=sys.stderr)


if __name__ == "__main__":
    run(main)
