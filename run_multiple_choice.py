"""Multiple choice (SWAG, as in the BERT paper, or your own JSON lines) with BERT.

    python run_multiple_choice.py --task_name=swag --data_dir=swagaf/data --vocab_file=vocab.txt \\
      --bert_config_file=bert_config.json --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt \\
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \\
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=out

Writes OUTPUT_DIR/eval_results.txt (eval_accuracy, eval_loss, global_step), OUTPUT_DIR/
test_results.tsv (each test example's choice probabilities on one line) and `model.ckpt-STEP`.
Data formats: see tasks/multiple_choice.py.
"""

import os
import sys

from absl import flags

from cli import InputError, run
from training.flags import (check_shared_flags, define_shared_flags, load_config, run_options,
                            strategy_from_flags)

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "The input data dir with the train, dev and test files.")
flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("task_name", None, "swag (SWAG's CSV files) or generic (JSON lines).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text (False for cased models).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total length of [CLS] context [SEP] ending [SEP].")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 16, "Total batch size for training (examples, each with all its choices).")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 2e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate warmup for.")
define_shared_flags()


def _check_flags():
    for name in ("data_dir", "bert_config_file", "task_name", "vocab_file", "output_dir"):
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
    if FLAGS.max_seq_length < 4:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length}: too small for [CLS] A [SEP] B [SEP]")
    check_shared_flags()


def main(argv):
    del argv
    _check_flags()
    import modeling
    from tasks import classifier_task, multiple_choice
    from tokenization import FullTokenizer, validate_case_matches_checkpoint
    from training.driver import Driver
    from training.results import write_eval_results
    task = FLAGS.task_name.lower()
    read = lambda split: multiple_choice.read_examples(FLAGS.data_dir, task, split)  # noqa: E731
    train = read("train") if FLAGS.do_train else None
    dev = read("dev") if FLAGS.do_eval else None
    test = read("test") if FLAGS.do_predict else None
    try:
        validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    except ValueError as error:
        raise InputError(str(error)) from None
    config = load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    strategy = strategy_from_flags()
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    if FLAGS.init_checkpoint:
        modeling.checkpoints.resolve_checkpoint_path(FLAGS.init_checkpoint)  # exists?
    driver = Driver(strategy, lambda: modeling.BertMultipleChoice(config),
                    run_options(strategy, FLAGS.output_dir, FLAGS.init_checkpoint))
    if FLAGS.do_train:
        print(f"training on {len(train)} examples", file=sys.stderr)
        driver.train(multiple_choice.choice_training(
            train, tokenizer, FLAGS.max_seq_length, FLAGS.train_batch_size, FLAGS.learning_rate,
            FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.gradient_accumulation_steps, FLAGS.seed))
    else:
        driver.restore_for_inference()
    if dev is not None:
        probabilities = multiple_choice.predict_probabilities(driver, dev, tokenizer, FLAGS.max_seq_length,
                                                              FLAGS.eval_batch_size)
        result = multiple_choice.evaluation_results(dev, probabilities, driver.step)
        write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
        for key in ("eval_accuracy", "eval_loss"):
            print(f"  {key} = {result[key]}", file=sys.stderr)
    if test is not None:
        probabilities = multiple_choice.predict_probabilities(driver, test, tokenizer, FLAGS.max_seq_length,
                                                              FLAGS.predict_batch_size)
        classifier_task.write_test_results(multiple_choice.test_rows(test, probabilities),
                                           os.path.join(FLAGS.output_dir, "test_results.tsv"))


if __name__ == "__main__":
    run(main)
