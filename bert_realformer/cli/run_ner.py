"""Named-entity recognition (token classification) with BERT, optionally with a CRF on top.

    python run_ner.py --task_name=conll2003 --data_dir=conll2003 --vocab_file=vocab.txt \\
      --bert_config_file=bert_config.json --init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt \\
      --do_lower_case=False --do_train --do_eval --do_predict --max_seq_length=128 \\
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=out [--crf]

DATA_DIR holds train/dev/test files in CoNLL column format (see tasks/ner_data.py). Writes
OUTPUT_DIR/eval_results.txt (entity precision/recall/F1 over chunks, see tasks/ner_metrics.py; token
accuracy, per-type scores), OUTPUT_DIR/eval_predictions.txt and test_predictions.txt (each
input line with the predicted tag appended: conlleval's input), and `model.ckpt-STEP`.
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

define_finetuning_flags("generic, conll2003, msra or peoples_daily (file names and entity types).",
                        task_default="generic",
                        data_help="The input data dir with the train, dev and test files (CoNLL format).",
                        max_seq_length_help="WordPieces per window; longer sentences are split into windows.")
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull
flags.DEFINE_bool("crf", False, "A linear-chain CRF over the tag scores (Viterbi decoding).")


def _check_flags():
    check_finetuning_flags(3, "[CLS] token [SEP]")
    check_monitoring_flags(FLAGS.do_eval, "--do_eval (DATA_DIR's dev file)", MONITORED_METRICS)


MONITORED_METRICS = ("f1", "precision", "recall", "accuracy")


def _read_data(task):
    """(labels, train file or None, dev file or None, test file or None), checked."""
    from bert_realformer.tasks.ner import reading as ner_data
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
    from bert_realformer.tasks.ner import reading as ner_data
    from bert_realformer.tasks.ner import task as ner_task
    task = FLAGS.task_name.lower()
    labels, train, dev, test = _read_data(task)
    driver, tokenizer = finetuning_driver(
        lambda config: modeling.BertTokenClassifier(config, len(labels), crf=FLAGS.crf))

    def predict(conll_file, batch_size):
        return ner_task.predict_tags(driver, conll_file.sentences, tokenizer, labels, FLAGS.max_seq_length,
                                     batch_size, FLAGS.crf, FLAGS.dynamic_padding)

    def evaluate(step):
        predicted = predict(dev, FLAGS.eval_batch_size)
        tag_ids = [labels.index(tag) for sentence in predicted for tag in sentence]
        return ner_task.evaluation_results(dev.sentences, predicted, step), tag_ids, predicted

    if FLAGS.do_train:
        step = finetuning.train(
            driver, lambda seed: ner_task.training_task(train.sentences, tokenizer, FLAGS.max_seq_length,
                                                        schedule_from_flags(seed), labels=labels, use_crf=FLAGS.crf),
            (lambda step: evaluate(step)[:2]) if dev is not None else None, known_metrics=MONITORED_METRICS,
            num_classes=None, label_names=labels)
    else:
        step = finetuning.restore(driver)
    if dev is not None:
        result, tag_ids, predicted = evaluate(step)
        ner_data.write_predictions(dev, predicted, os.path.join(FLAGS.output_dir, "eval_predictions.txt"))
        finetuning.write_results(driver, result, tag_ids, os.path.join(FLAGS.output_dir, "eval_results.txt"),
                                 labels, shown=MONITORED_METRICS)
    if test is not None:
        ner_data.write_predictions(test, predict(test, FLAGS.predict_batch_size),
                                   os.path.join(FLAGS.output_dir, "test_predictions.txt"))


entry = script_entry(main, __doc__)  # the installed command `bert-run-ner`

if __name__ == "__main__":
    entry()
