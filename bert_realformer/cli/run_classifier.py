"""Fine-tuning for sentence and sentence-pair classification (and STS-B regression), as the
original run_classifier.py, for GLUE, XNLI, CLUE, THUCNews-style and users' own data.

    python run_classifier.py --task_name=tnews --data_dir=tnews_public --vocab_file=$CKPT/vocab.txt \\
      --bert_config_file=$CKPT/bert_config.json --init_checkpoint=$CKPT/bert_model.ckpt \\
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \\
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=out

($CKPT: a released checkpoint's directory, such as chinese_roberta_wwm_ext_L-12_H-768_A-12.)
Writes OUTPUT_DIR/eval_results.txt (accuracy, loss, macro/weighted precision/recall/F1, per-class
scores, the confusion matrix, and MCC / F1 / Pearson and Spearman where the task reports them),
OUTPUT_DIR/test_results.tsv (class probabilities per line, in the order of the labels in
OUTPUT_DIR/label_list.txt), `model.ckpt-STEP`, and with --export_dir a SavedModel that takes raw
text and gives the probabilities and the predicted label. --task_name=generic reads users' files
(TSV and CSV with a header row naming the columns); its labels come from --label_file, else
from the run's OUTPUT_DIR/label_list.txt, else from the training file (sorted, as integers
when they all are). With --multi_label each example has any number of the labels (a sigmoid per
label): eval_results.txt gives micro/macro F1 and each label's precision, recall and F1 at the
decision thresholds, test_results.tsv each label's probability.
"""

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline import finetuning_flags, training_flags
from bert_realformer.commandline.finetuning_flags import check_monitoring_flags
from bert_realformer.commandline.runner import script_entry
from bert_realformer.commandline.training_flags import (
    check_finetuning_flags,
    define_finetuning_flags,
)
from bert_realformer.errors import InputError

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
                     "truncating it. Evaluation, prediction and the SavedModel combine a document's windows into one "
                     "row (--window_pooling); training as --window_training says.", lower_bound=1)
flags.DEFINE_enum("window_pooling", "auto", ["auto", "max", "mean", "first"], "With --doc_stride: how a document's "
                  "windows combine into one prediction: max (each class's largest logit: a class wins by its strongest "
                  "window), mean (of their logits: the renormalised mean of their log-probabilities), first (the "
                  "first window alone, as head truncation reads), or auto: trained as max, and every dev evaluation "
                  "reads the windows all three ways and keeps the best by --keep_best_by; the choice goes with the "
                  "best checkpoint and into eval_results.txt, prediction and the SavedModel (max where no dev "
                  "evaluation ran). --window_training=pooled trains with it (max or mean). Regression: the scores' "
                  "maximum, mean or first.")
flags.DEFINE_enum("window_training", "separate", ["separate", "pooled"], "With --doc_stride: separate: every "
                  "window is a training example with its document's label; pooled: a document's windows are "
                  "pooled (--window_pooling) before the loss, one loss per document, as prediction pools them "
                  "(from a small or new model with few updates it can stay at chance: docs/classification.md).")
flags.DEFINE_integer("max_windows_per_document", 8, "--window_training=pooled: the most windows of one document in "
                     "a training batch (a longer document trains on that many of its windows, drawn anew each "
                     "epoch); a batch runs up to --train_batch_size times this many sequences.", lower_bound=1)
flags.DEFINE_enum("truncation", "head", ["head", "tail", "head_tail"], "Without --doc_stride, which tokens of a text "
                  "too long to fit are kept: head (the first, as the original), tail (the last), head_tail (the "
                  "first quarter of the room and the rest from the end).")
flags.DEFINE_bool("group_by_length", False, "Training: batches of examples of similar lengths, each padded to its "
                  "longest (faster on CPU/GPU; changes the batches, and the shapes vary: not for TPUs).")
flags.DEFINE_enum("loss", "cross_entropy", ["cross_entropy", "focal"], "The training loss: cross_entropy (the "
                  "original's) or focal (-(1-p)^gamma log p: examples the model already gets right weigh less).")
flags.DEFINE_float("focal_gamma", 2.0, "--loss=focal: gamma (0 is cross-entropy).")
flags.DEFINE_float("label_smoothing", 0.0, "Training targets (1-e) for the label and e/C spread over the C classes "
                   "(0: the label alone, as the original).")
flags.DEFINE_string("class_weights", None, "Weigh each training example by its class: balanced (N / (C * the "
                    "class's examples), so every class weighs as much in all), or a file of LABEL<TAB>WEIGHT lines, "
                    "one per label. The loss is the weighted mean.")
flags.DEFINE_float("rdrop_alpha", 0.0, "R-Drop: each training example runs twice with different dropout and the "
                   "loss adds alpha times the symmetric KL divergence of the two predictions (the loss is 1/2 (CE1 "
                   "+ CE2) + alpha/4 (KL(p1||p2) + KL(p2||p1))). 0: one pass, as the original.")
flags.DEFINE_bool("multi_label", False, "--task_name=generic: each example has any number of the labels: the label "
                  "column holds them separated by --label_separator (an empty field: none; JSON lines: a list). A "
                  "sigmoid per label, trained with binary cross-entropy; evaluated by micro-averaged F1.")
flags.DEFINE_string("label_separator", ",", "--multi_label: what separates an example's labels in TSV and CSV files.")
flags.DEFINE_float("multi_label_threshold", 0.5, "--multi_label: an example has a label when its probability "
                   "reaches this. Without it, a run that does not train uses the thresholds recorded by the run "
                   "that trained OUTPUT_DIR (training_options.json), else 0.5.")
flags.DEFINE_bool("tune_thresholds", False, "--multi_label: each label's threshold chosen on the dev set (the best "
                  "F1 among 0.05, 0.10, ..., 0.95) at every evaluation, and used for prediction and the export; the "
                  "dev metrics at thresholds chosen on the dev set are optimistic.")
flags.DEFINE_string("export_dir", None, "Export a SavedModel taking raw text (text_a, text_b) to EXPORT_DIR/<version>.")


def _check_flags():
    check_finetuning_flags(3, "[CLS] A [SEP]", other_modes=("export_dir",))
    if FLAGS.multi_label:
        from bert_realformer.tasks.multi_label.metrics import REPORTED
    else:
        from bert_realformer.tasks.classification.metrics import REPORTED
    check_monitoring_flags(FLAGS.do_eval, "--do_eval (DATA_DIR's dev file)", REPORTED)
    _check_window_flags()
    if FLAGS.doc_stride and FLAGS.truncation != "head":
        raise InputError(f"--truncation={FLAGS.truncation} cuts a text to one window; --doc_stride reads all of "
                         "it in windows: use one or the other")
    if FLAGS.doc_stride and FLAGS.window_training == "pooled" and FLAGS.group_by_length:
        raise InputError("--group_by_length groups windows by length; --window_training=pooled trains whole "
                         "documents: use --window_training=separate or leave --group_by_length out")
    if FLAGS.doc_stride and FLAGS.do_train and FLAGS.window_training == "pooled" and FLAGS.window_pooling == "first":
        raise InputError("--window_pooling=first reads the first window alone: to train on it, leave --doc_stride "
                         "out (head truncation); or train --window_pooling=max or auto")
    if FLAGS["focal_gamma"].present and FLAGS.loss != "focal":
        raise InputError(f"--focal_gamma={FLAGS.focal_gamma} is focal loss's: it needs --loss=focal")
    if FLAGS.class_weights and FLAGS.class_weights != "balanced" and not storage.isfile(FLAGS.class_weights):
        raise InputError(f"--class_weights={FLAGS.class_weights}: expected balanced or a file of LABEL<TAB>WEIGHT "
                         "lines; there is no such file")
    _check_multi_label_flags()
    if FLAGS.export_dir:  # before training: an export that fails would come after all of it
        storage.check_writable_dir(FLAGS.export_dir, "export_dir")


def _check_window_flags():
    """The long-document flags given where they would change nothing."""
    if not FLAGS.doc_stride:
        for name in ("window_training", "window_pooling", "max_windows_per_document"):
            if FLAGS[name].present:
                raise InputError(f"--{name} is for texts read in windows: it needs --doc_stride=N (without it a "
                                 f"text is cut to --max_seq_length as --truncation says)")
    elif FLAGS["max_windows_per_document"].present and FLAGS.window_training != "pooled":
        raise InputError(f"--max_windows_per_document={FLAGS.max_windows_per_document} limits the windows of a "
                         "document trained together: it needs --window_training=pooled (separate training trains "
                         "every window)")


def _check_multi_label_flags():
    if not FLAGS.multi_label:
        for name in ("label_separator", "multi_label_threshold", "tune_thresholds"):
            if FLAGS[name].present:
                raise InputError(f"--{name} is for multi-label classification: it needs --multi_label")
        return
    if FLAGS.task_name.lower() != "generic":
        raise InputError(f"--multi_label reads users' files (--task_name=generic), not --task_name={FLAGS.task_name}")
    for name, unsupported in (("doc_stride", FLAGS.doc_stride), ("loss", FLAGS.loss != "cross_entropy"),
                              ("label_smoothing", FLAGS.label_smoothing), ("class_weights", FLAGS.class_weights)):
        if unsupported:
            raise InputError(f"--{name} is not available with --multi_label (sigmoid binary cross-entropy, texts "
                             "cut as --truncation says)")


def _multi_label_task(run):
    from bert_realformer.tasks import registry
    from bert_realformer.tasks.multi_label.task import MultiLabelOptions
    options = MultiLabelOptions(
        data_dir=FLAGS.data_dir, label_file=FLAGS.label_file, label_separator=FLAGS.label_separator,
        data_options={"data_format": FLAGS.data_format, "text_a_column": FLAGS.text_a_column,
                      "text_b_column": FLAGS.text_b_column, "label_column": FLAGS.label_column},
        threshold=FLAGS.multi_label_threshold if FLAGS["multi_label_threshold"].present else None,
        tune_thresholds=FLAGS.tune_thresholds, truncation=FLAGS.truncation,
        group_by_length=FLAGS.group_by_length, rdrop_alpha=FLAGS.rdrop_alpha)
    return registry.get("multi_label")(run.task, options)


def main(argv):
    del argv
    _check_flags()
    run = finetuning_flags.finetuning_options(export_dir=FLAGS.export_dir)
    if FLAGS.multi_label:
        finetuning_flags.run(_multi_label_task(run), run)
        return
    from bert_realformer.tasks import registry
    from bert_realformer.tasks.classification.task import ClassificationOptions
    options = ClassificationOptions(
        task_name=FLAGS.task_name.lower(), data_dir=FLAGS.data_dir, label_file=FLAGS.label_file,
        data_options={"language": FLAGS.xnli_language, "mismatched": FLAGS.mnli_mismatched,
                      "data_format": FLAGS.data_format, "text_a_column": FLAGS.text_a_column,
                      "text_b_column": FLAGS.text_b_column, "label_column": FLAGS.label_column},
        doc_stride=FLAGS.doc_stride, window_pooling=FLAGS.window_pooling, window_training=FLAGS.window_training,
        max_windows_per_document=FLAGS.max_windows_per_document, truncation=FLAGS.truncation,
        group_by_length=FLAGS.group_by_length, loss=FLAGS.loss, focal_gamma=FLAGS.focal_gamma,
        label_smoothing=FLAGS.label_smoothing, class_weights=FLAGS.class_weights, rdrop_alpha=FLAGS.rdrop_alpha)
    finetuning_flags.run(registry.get("classification")(run.task, options), run)


entry = script_entry(main, __doc__)  # the installed command `bert-run-classifier`

if __name__ == "__main__":
    entry()
