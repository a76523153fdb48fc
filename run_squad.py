"""SQuAD v1.1 / v2.0 fine-tuning and prediction, as the original run_squad.py.

    python run_squad.py --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
      --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --do_train --train_file=train-v1.1.json \\
      --do_predict --predict_file=dev-v1.1.json --do_eval --max_seq_length=384 --doc_stride=128 \\
      --output_dir=out [--version_2_with_negative]

Writes OUTPUT_DIR/predictions.json, nbest_predictions.json, null_odds.json (v2.0) and, with
--do_eval, eval_results.txt with the official scripts' scores.
"""

import json
import os
import sys

from absl import flags

from cli import InputError, run
from training.flags import define_shared_flags, load_config, strategy_from_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_integer("max_seq_length", 384, "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how much stride to take between chunks.")
flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate warmup for.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps between progress lines.")
flags.DEFINE_integer("n_best_size", 20, "The total number of n-best predictions to generate in the nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be generated.")
flags.DEFINE_bool("verbose_logging", False, "If true, all of the warnings related to data processing will be printed.")
flags.DEFINE_bool("version_2_with_negative", False, "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "If null_score - best_non_null is greater than the threshold predict null.")
flags.DEFINE_bool("do_eval", False, "Score the predictions of --predict_file against its answers (official EM/F1).")
define_shared_flags()


def _arrays(features, is_training):
    import numpy as np
    out = {"input_ids": np.array([f.input_ids for f in features], "int32"),
           "input_mask": np.array([f.input_mask for f in features], "int32"),
           "segment_ids": np.array([f.segment_ids for f in features], "int32")}
    if is_training:
        out["start_positions"] = np.array([f.start_position for f in features], "int32")
        out["end_positions"] = np.array([f.end_position for f in features], "int32")
    return out


def _loss_fn(model, features, training, step, totals):
    import tensorflow as tf
    start_logits, end_logits = model(features, training=training)

    def nll(logits, positions):
        return -tf.gather(tf.nn.log_softmax(logits, -1), positions, batch_dims=1)
    per_example = (nll(start_logits, features["start_positions"]) + nll(end_logits, features["end_positions"])) / 2.0
    share = tf.reduce_sum(per_example) / totals["examples"]
    return share, {"loss": share}


def _totals(features):
    import tensorflow as tf
    return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def train(strategy, model, tokenizer):
    import tensorflow as tf

    import modeling
    from tasks.squad import convert_examples_to_features, read_squad_examples
    from training.checkpointing import initialise, training_state
    from training.optimization import create_optimizer
    from training.trainer import TrainLoop, global_batch_slices
    examples, skipped = read_squad_examples(FLAGS.train_file, True, FLAGS.version_2_with_negative)
    if not examples:
        raise InputError(f"--train_file={FLAGS.train_file}: no usable questions")
    features = convert_examples_to_features(examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
                                            FLAGS.max_query_length, True)
    print(f"training on {len(examples)} questions ({skipped} skipped), {len(features)} features", file=sys.stderr)
    steps = max(1, int(len(features) / FLAGS.train_batch_size / FLAGS.gradient_accumulation_steps * FLAGS.num_train_epochs))
    with strategy.scope():
        optimizer = create_optimizer(FLAGS.learning_rate, steps, int(steps * FLAGS.warmup_proportion),
                                     FLAGS.optimizer, FLAGS.weight_decay)
        loop = TrainLoop(strategy, model, optimizer, _loss_fn, _totals,
                         accumulation_steps=FLAGS.gradient_accumulation_steps,
                         loss_scaling=FLAGS.mixed_precision == "fp16", use_xla=FLAGS.use_xla)
    _, manager = training_state(model, optimizer, loop, FLAGS.output_dir, FLAGS.keep_checkpoint_max)
    if manager.restored:
        print(f"resuming from {manager.restored}", file=sys.stderr)
    elif FLAGS.init_checkpoint:
        initialise(model, FLAGS.init_checkpoint)
    data = tf.data.Dataset.from_tensor_slices(_arrays(features, True)).repeat()
    data = data.shuffle(min(len(features), 10000), seed=FLAGS.seed).batch(FLAGS.train_batch_size, drop_remainder=True)
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda context: global_batch_slices(data, FLAGS.train_batch_size, context)))
    step = int(optimizer.iterations.numpy())
    while step < steps:
        metrics = loop.train_step(iterator)
        step = int(optimizer.iterations.numpy())
        if step % FLAGS.iterations_per_loop == 0 or step == steps:
            print(f"step {step}/{steps}: loss {float(metrics['loss']):.4f}", file=sys.stderr, flush=True)
        if step % FLAGS.save_checkpoints_steps == 0 or step == steps:
            manager.save(checkpoint_number=step)
    print(f"wrote {modeling.save_tf1_checkpoint(model, os.path.join(FLAGS.output_dir, f'model.ckpt-{step}'))}",
          file=sys.stderr)


def predict(model, tokenizer):
    import numpy as np
    import tensorflow as tf

    from tasks.squad import RawResult, compute_predictions, convert_examples_to_features, read_squad_examples
    examples, _ = read_squad_examples(FLAGS.predict_file, False, FLAGS.version_2_with_negative)
    features = convert_examples_to_features(examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
                                            FLAGS.max_query_length, False)
    arrays = _arrays(features, False)

    @tf.function
    def forward(batch):
        return model(batch, training=False)

    results = []
    for i in range(0, len(features), FLAGS.predict_batch_size):
        batch = {k: v[i:i + FLAGS.predict_batch_size] for k, v in arrays.items()}
        starts, ends = (np.asarray(t, np.float64) for t in forward(batch))
        for j, feature in enumerate(features[i:i + FLAGS.predict_batch_size]):
            results.append(RawResult(feature.unique_id, starts[j].tolist(), ends[j].tolist()))
    predictions, nbest, null_odds = compute_predictions(
        examples, features, results, FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.do_lower_case,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold)
    outputs = {"predictions.json": predictions, "nbest_predictions.json": nbest}
    if FLAGS.version_2_with_negative:
        outputs["null_odds.json"] = null_odds
    for name, value in outputs.items():
        path = os.path.join(FLAGS.output_dir, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2, ensure_ascii=False)
        os.replace(path + ".tmp", path)
    return predictions, null_odds


def main(argv):
    del argv
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if not FLAGS.do_train and not FLAGS.do_predict:
        raise InputError("at least one of --do_train or --do_predict must be true")
    if FLAGS.do_train and not FLAGS.train_file:
        raise InputError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise InputError("--do_predict needs --predict_file")
    for name in ("vocab_file", "train_file", "predict_file"):
        value = getattr(FLAGS, name)
        if value and not os.path.isfile(value):
            raise InputError(f"--{name}={value}: no such file")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length} must exceed --max_query_length + 3")
    import keras

    import modeling
    from tokenization import FullTokenizer
    from training.checkpointing import initialise
    from training.distribution import set_mixed_precision
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    strategy = strategy_from_flags()
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    set_mixed_precision(FLAGS.mixed_precision)
    with strategy.scope():
        model = modeling.BertSpanLabeler(config)
        model.build()
    if FLAGS.do_train:
        train(strategy, model, tokenizer)
    elif FLAGS.init_checkpoint:
        initialise(model, FLAGS.init_checkpoint)
    if FLAGS.do_predict:
        predictions, null_odds = predict(model, tokenizer)
        if FLAGS.do_eval:
            from tasks.squad_evaluate import evaluate, evaluate_v1
            from training.results import write_eval_results
            with open(FLAGS.predict_file, encoding="utf-8") as f:
                dataset = json.load(f)["data"]
            result = (evaluate(dataset, predictions, null_odds, FLAGS.null_score_diff_threshold)
                      if FLAGS.version_2_with_negative else evaluate_v1(dataset, predictions))
            write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
            print(json.dumps(result), file=sys.stderr)


if __name__ == "__main__":
    run(main)
