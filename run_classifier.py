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

import os
import sys

from absl import flags

from cli import InputError, run
from training.flags import (check_shared_flags, define_shared_flags, load_config, run_options,
                            strategy_from_flags)

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
    check_shared_flags()


def main(argv):
    del argv
    _check_flags()
    import modeling
    from tasks import classifier_task
    from tasks.classifier_data import get_processor
    from tasks.classifier_features import cached_features
    from tokenization import FullTokenizer, validate_case_matches_checkpoint
    from training.driver import Driver
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
    options = run_options(strategy, FLAGS.output_dir, FLAGS.init_checkpoint)
    num_labels = 1 if regression else len(label_list)
    driver = Driver(strategy, lambda: modeling.BertClassifier(config, num_labels=num_labels), options)
    if FLAGS.do_train:
        path = os.path.join(FLAGS.output_dir, "train.tf_record")
        reused = cached_features(train_examples, label_list, FLAGS.max_seq_length, tokenizer, path)
        print(f"{'re-used' if reused else 'wrote'} {path} ({len(train_examples)} examples)", file=sys.stderr)
        steps = classifier_task.num_train_steps(len(train_examples), FLAGS.train_batch_size,
                                                FLAGS.num_train_epochs, FLAGS.gradient_accumulation_steps)
        driver.train(classifier_task.classifier_task(
            path, FLAGS.train_batch_size, FLAGS.max_seq_length, regression, FLAGS.learning_rate,
            steps, FLAGS.warmup_proportion, FLAGS.seed))
    else:
        driver.restore_for_inference()
    if FLAGS.do_eval:
        outputs, labels = classifier_task.predict(
            driver, eval_examples, label_list, tokenizer, os.path.join(FLAGS.output_dir, "eval.tf_record"),
            FLAGS.eval_batch_size, FLAGS.max_seq_length)
        result = classifier_task.evaluation_results(task, outputs, labels, label_list, driver.step)
        write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
        for key in ("eval_accuracy", "eval_loss", "macro_f1", "pearson", "spearman"):
            if key in result:
                print(f"  {key} = {result[key]}", file=sys.stderr)
    if FLAGS.do_predict:
        outputs, _ = classifier_task.predict(
            driver, test_examples, label_list, tokenizer, os.path.join(FLAGS.output_dir, "predict.tf_record"),
            FLAGS.predict_batch_size, FLAGS.max_seq_length)
        classifier_task.write_test_results(outputs, os.path.join(FLAGS.output_dir, "test_results.tsv"))
    if FLAGS.export_dir:
        from tasks.export import export_classifier
        path = export_classifier(driver.model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                                 label_list, FLAGS.export_dir)
        print(f"exported {path}", file=sys.stderr)


if __name__ == "__main__":
    run(main)
