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

from absl import flags

from bert_realformer.commandline import finetuning, training_flags
from bert_realformer.commandline.finetuning import check_monitoring_flags
from bert_realformer.commandline.training_flags import (
    check_finetuning_flags,
    define_finetuning_flags,
    finetuning_driver,
    schedule_from_flags,
)
from bert_realformer.runner import script_entry

FLAGS = flags.FLAGS

define_finetuning_flags("swag (SWAG's CSV files) or generic (JSON lines).",
                        data_help="The input data dir with the train, dev and test files.",
                        train_batch_size=16, learning_rate=2e-5,
                        max_seq_length_help="The maximum total length of [CLS] context [SEP] ending [SEP].")
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull


def _check_flags():
    check_finetuning_flags(4, "[CLS] A [SEP] B [SEP]")
    check_monitoring_flags(FLAGS.do_eval, "--do_eval (DATA_DIR's dev file)", MONITORED_METRICS)


MONITORED_METRICS = ("eval_accuracy", "eval_loss")


def main(argv):
    del argv
    _check_flags()
    import modeling
    from bert_realformer.tasks import multiple_choice
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.multiple_choice import task as choice_task
    task = FLAGS.task_name.lower()
    read = lambda split: multiple_choice.read_examples(FLAGS.data_dir, task, split)  # noqa: E731
    train = read("train") if FLAGS.do_train else None
    dev = read("dev") if FLAGS.do_eval else None
    test = read("test") if FLAGS.do_predict else None
    driver, tokenizer = finetuning_driver(modeling.BertMultipleChoice)

    def evaluate(step):
        probabilities = choice_task.predict_probabilities(driver, dev, tokenizer, FLAGS.max_seq_length,
                                                          FLAGS.eval_batch_size, FLAGS.dynamic_padding)
        return multiple_choice.evaluation_results(dev, probabilities, step), probabilities.argmax(-1)

    if FLAGS.do_train:
        choices = max(len(example.choices) for example in train)
        step = finetuning.train(
            driver, lambda seed: choice_task.training_task(train, tokenizer, FLAGS.max_seq_length,
                                                           schedule_from_flags(seed)),
            evaluate if dev is not None else None, known_metrics=MONITORED_METRICS, num_classes=choices)
    else:
        step = finetuning.restore(driver)
    if dev is not None:
        result, predicted = evaluate(step)
        finetuning.write_results(driver, result, predicted, os.path.join(FLAGS.output_dir, "eval_results.txt"),
                                 shown=MONITORED_METRICS)
    if test is not None:
        probabilities = choice_task.predict_probabilities(driver, test, tokenizer, FLAGS.max_seq_length,
                                                          FLAGS.predict_batch_size, FLAGS.dynamic_padding)
        classifier_task.write_test_results(multiple_choice.test_rows(test, probabilities),
                                           os.path.join(FLAGS.output_dir, "test_results.tsv"))


entry = script_entry(main, __doc__)  # the installed command `bert-run-multiple-choice`

if __name__ == "__main__":
    entry()
