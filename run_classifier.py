"""Fine-tuning for sentence and sentence-pair classification (and STS-B regression), as the
original run_classifier.py, for GLUE, XNLI, CLUE, THUCNews-style and users' own data.

    python run_classifier.py --task_name=tnews --data_dir=tnews_public --vocab_file=vocab.txt \\
      --bert_config_file=bert_config.json --init_checkpoint=chinese_roberta_wwm_ext/bert_model.ckpt \\
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \\
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=out

Writes OUTPUT_DIR/eval_results.txt (accuracy, loss, macro/weighted precision/recall/F1, per-class
scores, the confusion matrix, and MCC / F1 / Pearson and Spearman where the task reports them),
OUTPUT_DIR/test_results.tsv (class probabilities per line), `model.ckpt-STEP`, and with
--export_dir a SavedModel that takes raw text.
"""

import json
import os
import sys
import time

from absl import flags

from cli import InputError, run
from training.flags import define_shared_flags, load_config, strategy_from_flags

FLAGS = flags.FLAGS

# The original's flags.
flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files (or other data files) for the task.")
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("task_name", None, "The name of the task to train (its dataset's lower-case name).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be True for uncased models and False for cased models.")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate warmup for.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps between progress lines and summaries.")
define_shared_flags()

# Ours: task options and users' own data.
flags.DEFINE_string("xnli_language", "zh", "XNLI: the language to train and evaluate on.")
flags.DEFINE_bool("mnli_mismatched", False, "MNLI: evaluate and predict on the mismatched dev/test sets.")
flags.DEFINE_enum("data_format", "tsv", ["tsv", "csv", "jsonl"], "--task_name=generic: format of DATA_DIR/{train,dev,test}.<format>.")
flags.DEFINE_string("text_a_column", "text", "--task_name=generic: column (or JSON key) of the first text.")
flags.DEFINE_string("text_b_column", None, "--task_name=generic: column of the second text, for sentence pairs.")
flags.DEFINE_string("label_column", "label", "--task_name=generic: column of the label.")
flags.DEFINE_string("label_file", None, "--task_name=generic: the labels, one per line (default: collected from the training file).")
flags.DEFINE_string("export_dir", None, "Export a SavedModel taking raw text (text_a, text_b) to EXPORT_DIR/<version>.")


def _check_flags():
    for name in ("data_dir", "bert_config_file", "task_name", "vocab_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise InputError("at least one of --do_train, --do_eval, --do_predict or --export_dir is needed")
    for name in ("vocab_file", "bert_config_file"):
        if not os.path.isfile(getattr(FLAGS, name)):
            raise InputError(f"--{name}={getattr(FLAGS, name)}: no such file")
    if not os.path.isdir(FLAGS.data_dir):
        raise InputError(f"--data_dir={FLAGS.data_dir}: no such directory")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "max_seq_length"):
        if getattr(FLAGS, name) < 1:
            raise InputError(f"--{name}={getattr(FLAGS, name)}: must be at least 1")
    if FLAGS.max_seq_length < 3:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length}: too small for [CLS] A [SEP]")


def _loss_fn(regression):
    import tensorflow as tf

    def loss_fn(model, features, training, step, totals):
        logits = model(features, training=training)
        if regression:
            per_example = tf.square(tf.squeeze(logits, -1) - tf.cast(features["label_ids"], tf.float32))
        else:
            log_probs = tf.nn.log_softmax(logits, axis=-1)
            per_example = -tf.gather(log_probs, features["label_ids"], batch_dims=1)
        share = tf.reduce_sum(per_example) / totals["examples"]
        return share, {"loss": share}
    return loss_fn


def _totals(features):
    import tensorflow as tf
    return {"examples": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}


def train(strategy, model, examples, label_list, tokenizer, regression):
    from tasks.classifier_features import cached_features, make_dataset
    from training.checkpointing import initialise, training_state
    from training.optimization import create_optimizer
    from training.trainer import TrainLoop, global_batch_slices
    path = os.path.join(FLAGS.output_dir, "train.tf_record")
    reused = cached_features(examples, label_list, FLAGS.max_seq_length, tokenizer, path)
    print(f"{'re-used' if reused else 'wrote'} {path} ({len(examples)} examples)", file=sys.stderr)
    num_train_steps = int(len(examples) / FLAGS.train_batch_size / FLAGS.gradient_accumulation_steps
                          * FLAGS.num_train_epochs)
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
    with strategy.scope():
        optimizer = create_optimizer(FLAGS.learning_rate, num_train_steps, num_warmup_steps,
                                     FLAGS.optimizer, FLAGS.weight_decay)
        loop = TrainLoop(strategy, model, optimizer, _loss_fn(regression), _totals,
                         accumulation_steps=FLAGS.gradient_accumulation_steps,
                         loss_scaling=FLAGS.mixed_precision == "fp16", use_xla=FLAGS.use_xla)
    _, manager = training_state(model, optimizer, loop, FLAGS.output_dir, FLAGS.keep_checkpoint_max)
    if manager.restored:
        print(f"resuming from {manager.restored} at step {int(optimizer.iterations.numpy())}", file=sys.stderr)
    elif FLAGS.init_checkpoint:
        initialise(model, FLAGS.init_checkpoint)
    iterator = iter(strategy.distribute_datasets_from_function(lambda context: global_batch_slices(
        make_dataset(path, FLAGS.train_batch_size, FLAGS.max_seq_length, True, regression, FLAGS.seed),
        FLAGS.train_batch_size, context)))
    step = int(optimizer.iterations.numpy())
    start, start_step = time.time(), step
    while step < num_train_steps:
        metrics = loop.train_step(iterator)
        step = int(optimizer.iterations.numpy())
        if step % FLAGS.iterations_per_loop == 0 or step == num_train_steps:
            rate = (step - start_step) / max(time.time() - start, 1e-9)
            print(f"step {step}/{num_train_steps}: loss {float(metrics['loss']):.4f}, {rate:.2f} steps/s",
                  file=sys.stderr, flush=True)
            start, start_step = time.time(), step
        if step % FLAGS.save_checkpoints_steps == 0 or step == num_train_steps:
            manager.save(checkpoint_number=step)
    import modeling
    prefix = modeling.save_tf1_checkpoint(model, os.path.join(FLAGS.output_dir, f"model.ckpt-{step}"))
    print(f"wrote {prefix}", file=sys.stderr)
    return step


def predict(model, examples, label_list, tokenizer, name, batch_size, regression):
    """(probabilities or scores [N, C or 1], labels [N]) for `examples`, in order."""
    import numpy as np
    import tensorflow as tf

    from tasks.classifier_features import cached_features, make_dataset
    path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
    cached_features(examples, label_list, FLAGS.max_seq_length, tokenizer, path)

    @tf.function
    def forward(features):
        logits = model(features, training=False)
        return logits if regression else tf.nn.softmax(logits, axis=-1)

    outputs, labels = [], []
    for features in make_dataset(path, batch_size, FLAGS.max_seq_length, False, regression):
        outputs.append(forward(features).numpy())
        labels.append(features["label_ids"].numpy())
    return np.concatenate(outputs), np.concatenate(labels)


def evaluation_results(task, outputs, labels, label_list, global_step):
    """The eval_results.txt entries (key -> value)."""
    import numpy as np

    from tasks import metrics
    if label_list is None:
        scores = outputs[:, 0]
        return {"eval_loss": float(np.mean((scores - labels) ** 2)), "pearson": metrics.pearson(scores, labels),
                "spearman": metrics.spearman(scores, labels), "global_step": global_step}
    predictions = outputs.argmax(-1)
    loss = float(np.mean(-np.log(np.maximum(outputs[np.arange(len(labels)), labels], 1e-30))))
    report = metrics.classification_metrics(labels, predictions, len(label_list))
    result = {"eval_accuracy": report["accuracy"], "eval_loss": loss, "global_step": global_step}
    for key in ("macro_precision", "macro_recall", "macro_f1", "weighted_precision", "weighted_recall",
                "weighted_f1"):
        result[key] = report[key]
    if task == "cola":
        result["matthews_corrcoef"] = metrics.matthews_corrcoef(labels, predictions)
    if task in ("mrpc", "qqp"):
        result["f1"] = metrics.binary_f1(labels, predictions)
    per_class = report["per_class"]
    for i, label in enumerate(label_list):
        for name in ("precision", "recall", "f1", "support"):
            value = per_class[name][i]
            result[f"class_{label}_{name}"] = int(value) if name == "support" else float(value)
    result["confusion_matrix"] = json.dumps(report["confusion_matrix"].tolist())
    return result


def write_test_results(outputs, path):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in outputs:
            f.write("\t".join(str(float(v)) for v in row) + "\n")
    os.replace(tmp, path)


def main(argv):
    del argv
    _check_flags()
    import keras

    import modeling
    from tasks.classifier_data import get_processor
    from tokenization import FullTokenizer, validate_case_matches_checkpoint
    from training.checkpointing import initialise, latest_exported_step
    from training.distribution import set_mixed_precision
    from training.results import write_eval_results
    task = FLAGS.task_name.lower()
    processor = get_processor(task, FLAGS.data_dir, language=FLAGS.xnli_language,
                              mismatched=FLAGS.mnli_mismatched, data_format=FLAGS.data_format,
                              text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                              label_column=FLAGS.label_column, label_file=FLAGS.label_file)
    label_list = processor.get_labels()
    regression = label_list is None
    try:
        validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    except ValueError as error:
        raise InputError(str(error)) from None
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    strategy = strategy_from_flags()
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    train_examples = processor.get_train_examples(FLAGS.data_dir) if FLAGS.do_train else None
    eval_examples = processor.get_dev_examples(FLAGS.data_dir) if FLAGS.do_eval else None
    test_examples = processor.get_test_examples(FLAGS.data_dir) if FLAGS.do_predict else None
    if FLAGS.init_checkpoint:
        modeling.checkpoints.resolve_checkpoint_path(FLAGS.init_checkpoint)  # exists?
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    set_mixed_precision(FLAGS.mixed_precision)
    with strategy.scope():
        model = modeling.BertClassifier(config, num_labels=1 if regression else len(label_list))
        model.build()
    if FLAGS.do_train:
        step = train(strategy, model, train_examples, label_list, tokenizer, regression)
    else:
        initialise(model, FLAGS.init_checkpoint or FLAGS.output_dir)
        step = latest_exported_step(FLAGS.output_dir)
    if FLAGS.do_eval:
        outputs, labels = predict(model, eval_examples, label_list, tokenizer, "eval",
                                  FLAGS.eval_batch_size, regression)
        result = evaluation_results(task, outputs, labels, label_list, step)
        write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
        for key in ("eval_accuracy", "eval_loss", "macro_f1", "pearson", "spearman"):
            if key in result:
                print(f"  {key} = {result[key]}", file=sys.stderr)
    if FLAGS.do_predict:
        outputs, _ = predict(model, test_examples, label_list, tokenizer, "predict",
                             FLAGS.predict_batch_size, regression)
        write_test_results(outputs, os.path.join(FLAGS.output_dir, "test_results.tsv"))
    if FLAGS.export_dir:
        from tasks.export import export_classifier
        path = export_classifier(model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                                 label_list, FLAGS.export_dir)
        print(f"exported {path}", file=sys.stderr)


if __name__ == "__main__":
    run(main)
