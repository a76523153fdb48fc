"""Named-entity recognition (token classification) with BERT, optionally with a CRF on top.

    python run_ner.py --task_name=conll2003 --data_dir=conll2003 --vocab_file=vocab.txt \\
      --bert_config_file=bert_config.json --init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt \\
      --do_lower_case=False --do_train --do_eval --do_predict --max_seq_length=128 \\
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=out [--crf]

DATA_DIR holds train/dev/test files in CoNLL column format (see tasks/ner_data.py). Writes
OUTPUT_DIR/eval_results.txt (entity precision/recall/F1 as conlleval counts them, token
accuracy, per-type scores), OUTPUT_DIR/eval_predictions.txt and test_predictions.txt (each
input line with the predicted tag appended: conlleval's input), and `model.ckpt-STEP`.
"""

import os
import sys

from absl import flags

from cli import InputError, run
from training.flags import (check_shared_flags, define_shared_flags, load_config, run_options,
                            strategy_from_flags)

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "The input data dir with the train, dev and test files (CoNLL format).")
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("task_name", "generic", "generic, conll2003, msra or peoples_daily (file names and entity types).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text (False for cased models).")
flags.DEFINE_integer("max_seq_length", 128, "WordPieces per window; longer sentences are split into windows.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on the dev file.")
flags.DEFINE_bool("do_predict", False, "Whether to tag the test file.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate warmup for.")
flags.DEFINE_bool("crf", False, "A linear-chain CRF over the tag scores (Viterbi decoding).")
define_shared_flags()


def _check_flags():
    for name in ("data_dir", "bert_config_file", "vocab_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise InputError("at least one of --do_train, --do_eval or --do_predict is needed")
    for name in ("vocab_file", "bert_config_file"):
        if not os.path.isfile(getattr(FLAGS, name)):
            raise InputError(f"--{name}={getattr(FLAGS, name)}: no such file")
    if not os.path.isdir(FLAGS.data_dir):
        raise InputError(f"--data_dir={FLAGS.data_dir}: no such directory")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        if getattr(FLAGS, name) < 1:
            raise InputError(f"--{name}={getattr(FLAGS, name)}: must be at least 1")
    if FLAGS.max_seq_length < 3:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length}: too small for [CLS] token [SEP]")
    check_shared_flags()


def _read_data(task):
    """(labels, train file or None, dev file or None, test file or None), checked."""
    from tasks import ner_data
    path = lambda split: ner_data.data_path(FLAGS.data_dir, task, split)  # noqa: E731
    train = ner_data.read_conll(path("train")) if FLAGS.do_train or task == "generic" else None
    dev = ner_data.read_conll(path("dev")) if FLAGS.do_eval else None
    test = ner_data.read_conll(path("test"), tagged=False) if FLAGS.do_predict else None
    labels = ner_data.labels_for(task, train or dev or test)
    role = "the training file" if task == "generic" else task
    for conll_file in (train, dev, test):
        if conll_file is not None:
            ner_data.check_labels(conll_file, labels, role)
    return labels, train, dev, test


def main(argv):
    del argv
    _check_flags()
    import modeling
    from tasks import ner_data, ner_task
    from tokenization import FullTokenizer, validate_case_matches_checkpoint
    from training.driver import Driver
    from training.results import write_eval_results
    task = FLAGS.task_name.lower()
    labels, train, dev, test = _read_data(task)
    try:
        validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    except ValueError as error:
        raise InputError(str(error)) from None
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    strategy = strategy_from_flags()
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    if FLAGS.init_checkpoint:
        modeling.checkpoints.resolve_checkpoint_path(FLAGS.init_checkpoint)  # exists?
    driver = Driver(strategy, lambda: modeling.BertTokenClassifier(config, len(labels), crf=FLAGS.crf),
                    run_options(strategy, FLAGS.output_dir, FLAGS.init_checkpoint))
    if FLAGS.do_train:
        training, windows = ner_task.ner_training(
            train.sentences, tokenizer, labels, FLAGS.max_seq_length, FLAGS.train_batch_size,
            FLAGS.learning_rate, FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.crf,
            FLAGS.gradient_accumulation_steps, FLAGS.seed)
        print(f"training on {len(train.sentences)} sentences ({windows} windows), labels: "
              f"{' '.join(labels)}", file=sys.stderr)
        driver.train(training)
    else:
        driver.restore_for_inference()
    for conll_file, batch_size, name in ((dev, FLAGS.eval_batch_size, "eval"),
                                         (test, FLAGS.predict_batch_size, "test")):
        if conll_file is None:
            continue
        predicted = ner_task.predict_tags(driver, conll_file.sentences, tokenizer, labels,
                                          FLAGS.max_seq_length, batch_size, FLAGS.crf)
        ner_data.write_predictions(conll_file, predicted, os.path.join(FLAGS.output_dir, f"{name}_predictions.txt"))
        if name == "eval":
            result = ner_task.evaluation_results(conll_file.sentences, predicted, driver.step)
            write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
            for key in ("precision", "recall", "f1", "accuracy"):
                print(f"  {key} = {result[key]}", file=sys.stderr)


if __name__ == "__main__":
    run(main)
