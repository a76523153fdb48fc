"""Fine-tuning for sentence and sentence-pair classification (and STS-B regression), as the
original run_classifier.py, for GLUE, XNLI, CLUE, THUCNews-style and users' own data.

    python run_classifier.py --task_name=tnews --data_dir=tnews_public --vocab_file=vocab.txt \\
      --bert_config_file=bert_config.json --init_checkpoint=chinese_roberta_wwm_ext/bert_model.ckpt \\
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \\
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=out

Writes OUTPUT_DIR/eval_results.txt (accuracy, loss, macro/weighted precision/recall/F1, per-class
scores, the confusion matrix, and MCC / F1 / Pearson and Spearman where the task reports them),
OUTPUT_DIR/test_results.tsv (class probabilities per line, in the order of the labels in
OUTPUT_DIR/label_list.txt), `model.ckpt-STEP`, and with --export_dir a SavedModel that takes raw
text and gives the probabilities and the predicted label. --task_name=generic reads users' files
(TSV and CSV with a header row naming the columns); its labels come from --label_file, else
from the run's OUTPUT_DIR/label_list.txt, else from the training file (sorted, as integers
when they all are).
"""

import os
import sys

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline import training_flags
from bert_realformer.commandline.training_flags import (
    check_finetuning_flags,
    define_finetuning_flags,
    finetuning_driver,
    schedule_from_flags,
)
from bert_realformer.runner import script_entry

FLAGS = flags.FLAGS

define_finetuning_flags("The name of the task to train (its dataset's lower-case name).")
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull

# Ours: task options and users' own data.
flags.DEFINE_string("xnli_language", "zh", "XNLI: the language to train and evaluate on.")
flags.DEFINE_bool("mnli_mismatched", False, "MNLI: evaluate and predict on the mismatched dev/test sets.")
flags.DEFINE_enum("data_format", "tsv", ["tsv", "csv", "jsonl"], "--task_name=generic: format of "
                  "DATA_DIR/{train,dev,test}.<format>.")
flags.DEFINE_string("text_a_column", "text", "--task_name=generic: column (or JSON key) of the first text.")
flags.DEFINE_string("text_b_column", None, "--task_name=generic: column of the second text, for sentence pairs.")
flags.DEFINE_string("label_column", "label", "--task_name=generic: column of the label.")
flags.DEFINE_string("label_file", None, "--task_name=generic: the labels, one per line (default: collected from the "
                    "training file).")
flags.DEFINE_integer("doc_stride", None, "Long texts: cut text_a (the document; in pairs, text_b is kept in every "
                     "window) into overlapping windows that start N tokens apart, as run_squad.py does, instead of "
                     "truncating it. Training uses every window with the document's label; evaluation, prediction and "
                     "the SavedModel combine a document's windows into one row (--window_pooling).", lower_bound=1)
flags.DEFINE_enum("window_pooling", "mean", ["mean", "max"], "With --doc_stride: how a document's windows combine: "
                  "mean of their log-probabilities (renormalised) or each class's maximum (renormalised); "
                  "regression: mean or maximum score.")
flags.DEFINE_bool("group_by_length", False, "Training: batches of examples of similar lengths, each padded to its "
                  "longest (faster on CPU/GPU; changes the batches, and the shapes vary: not for TPUs).")
flags.DEFINE_string("export_dir", None, "Export a SavedModel taking raw text (text_a, text_b) to EXPORT_DIR/<version>.")


def _check_flags():
    check_finetuning_flags(3, "[CLS] A [SEP]", other_modes=("export_dir",))
    if FLAGS.export_dir:  # before training: an export that fails would come after all of it
        storage.check_writable_dir(FLAGS.export_dir, "--export_dir")


def main(argv):
    del argv
    _check_flags()
    import modeling
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.classification.reading import get_processor
    from bert_realformer.training.results import write_eval_results
    task = FLAGS.task_name.lower()
    recorded = os.path.join(FLAGS.output_dir, classifier_task.LABEL_LIST)
    label_file = FLAGS.label_file or (recorded if task == "generic" and storage.isfile(recorded) else None)
    processor = get_processor(task, FLAGS.data_dir, language=FLAGS.xnli_language,
                              mismatched=FLAGS.mnli_mismatched, data_format=FLAGS.data_format,
                              text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                              label_column=FLAGS.label_column, label_file=label_file)
    label_list = processor.get_labels()
    regression = label_list is None
    if not regression:
        label_list = classifier_task.settle_label_list(label_list, FLAGS.output_dir)
    train_examples = processor.get_train_examples(FLAGS.data_dir) if FLAGS.do_train else None
    eval_examples = processor.get_dev_examples(FLAGS.data_dir) if FLAGS.do_eval else None
    test_examples = processor.get_test_examples(FLAGS.data_dir) if FLAGS.do_predict else None
    num_labels = 1 if regression else len(label_list)
    driver, tokenizer = finetuning_driver(lambda config: modeling.BertClassifier(config, num_labels=num_labels))
    if FLAGS.do_train:
        training = classifier_task.training_task(
            train_examples, tokenizer, FLAGS.max_seq_length, schedule_from_flags(), label_list=label_list,
            features_path=os.path.join(FLAGS.output_dir, "train.tf_record"), doc_stride=FLAGS.doc_stride,
            group_by_length=FLAGS.group_by_length)
        print(training.summary, file=sys.stderr)
        step = driver.train(training)
    else:
        step = driver.restore_for_inference()
    if FLAGS.do_eval:
        outputs, labels = classifier_task.predict(
            driver, eval_examples, label_list, tokenizer, os.path.join(FLAGS.output_dir, "eval.tf_record"),
            FLAGS.eval_batch_size, FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.window_pooling, FLAGS.dynamic_padding)
        result = classifier_task.evaluation_results(task, outputs, labels, label_list, step)
        write_eval_results(result, os.path.join(FLAGS.output_dir, "eval_results.txt"))
        for key in ("eval_accuracy", "eval_loss", "macro_f1", "pearson", "spearman"):
            if key in result:
                print(f"  {key} = {result[key]}", file=sys.stderr)
    if FLAGS.do_predict:
        outputs, _ = classifier_task.predict(
            driver, test_examples, label_list, tokenizer, os.path.join(FLAGS.output_dir, "predict.tf_record"),
            FLAGS.predict_batch_size, FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.window_pooling,
            FLAGS.dynamic_padding)
        classifier_task.write_test_results(outputs, os.path.join(FLAGS.output_dir, "test_results.tsv"))
    if FLAGS.export_dir:
        from bert_realformer.tasks.export import export_classifier
        path = export_classifier(driver.model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                                 label_list, FLAGS.export_dir, FLAGS.doc_stride, FLAGS.window_pooling)
        print(f"exported {path}", file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-run-classifier`

if __name__ == "__main__":
    entry()
