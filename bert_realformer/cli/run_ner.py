"""Named-entity recognition (token classification) with BERT, optionally with a CRF on top.

    python run_ner.py --task_name=conll2003 --data_dir=conll2003 --vocab_file=$CKPT/vocab.txt \\
      --bert_config_file=$CKPT/bert_config.json --init_checkpoint=$CKPT/bert_model.ckpt \\
      --do_lower_case=False --do_train --do_eval --do_predict --max_seq_length=128 \\
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=out [--crf]

($CKPT: a released cased checkpoint's directory, such as cased_L-12_H-768_A-12.) DATA_DIR holds
train/dev/test files in CoNLL column format (docs/other-tasks.md). Writes
OUTPUT_DIR/eval_results.txt (entity precision/recall/F1 over chunks as conlleval counts them; token
accuracy, per-type scores), OUTPUT_DIR/eval_predictions.txt and test_predictions.txt (each
input line with the predicted tag appended: conlleval's input), and `model.ckpt-STEP`.
"""

from absl import flags

from bert_realformer.commandline import finetuning_flags, training_flags
from bert_realformer.commandline.finetuning_flags import check_monitoring_flags
from bert_realformer.commandline.runner import script_entry
from bert_realformer.commandline.training_flags import (
    check_finetuning_flags,
    define_finetuning_flags,
)

FLAGS = flags.FLAGS

define_finetuning_flags("generic, conll2003, msra or peoples_daily (file names and entity types).",
                        task_default="generic",
                        data_help="The input data dir with the train, dev and test files (CoNLL format).",
                        max_seq_length_help="WordPieces per window; longer sentences are split into windows.")
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull
flags.DEFINE_bool("crf", False, "A linear-chain CRF over the tag scores (Viterbi decoding).")


def _check_flags():
    from bert_realformer.tasks.ner.metrics import REPORTED
    check_finetuning_flags(3, "[CLS] token [SEP]")
    check_monitoring_flags(FLAGS.do_eval, "--do_eval (DATA_DIR's dev file)", REPORTED)


def main(argv):
    del argv
    _check_flags()
    from bert_realformer.tasks import registry
    run = finetuning_flags.finetuning_options()
    task = registry.get("ner")(run.task, data_dir=FLAGS.data_dir, task_name=FLAGS.task_name.lower(),
                               use_crf=FLAGS.crf)
    finetuning_flags.run(task, run)


entry = script_entry(main, __doc__)  # the installed command `bert-run-ner`

if __name__ == "__main__":
    entry()
