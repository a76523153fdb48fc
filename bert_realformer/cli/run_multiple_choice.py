"""Multiple choice (SWAG, as in the BERT paper, or your own JSON lines) with BERT.

    python run_multiple_choice.py --task_name=swag --data_dir=swagaf/data --vocab_file=$CKPT/vocab.txt \\
      --bert_config_file=$CKPT/bert_config.json --init_checkpoint=$CKPT/bert_model.ckpt \\
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \\
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=out

Writes OUTPUT_DIR/eval_results.txt (eval_accuracy, eval_loss, global_step), OUTPUT_DIR/
test_results.tsv (each test example's choice probabilities on one line) and `model.ckpt-STEP`
($CKPT: a released checkpoint's directory, such as uncased_L-12_H-768_A-12). Data formats:
docs/other-tasks.md.
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

define_finetuning_flags("swag (SWAG's CSV files) or generic (JSON lines).",
                        data_help="The input data dir with the train, dev and test files.",
                        train_batch_size=16, learning_rate=2e-5,
                        max_seq_length_help="The maximum total length of [CLS] context [SEP] ending [SEP].")
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull


def _check_flags():
    from bert_realformer.tasks.multiple_choice.metrics import REPORTED
    check_finetuning_flags(4, "[CLS] A [SEP] B [SEP]")
    check_monitoring_flags(FLAGS.do_eval, "--do_eval (DATA_DIR's dev file)", REPORTED)


def main(argv):
    del argv
    _check_flags()
    from bert_realformer.tasks import registry
    run = finetuning_flags.finetuning_options()
    task = registry.get("multiple_choice")(run.task, data_dir=FLAGS.data_dir, task_name=FLAGS.task_name.lower())
    finetuning_flags.run(task, run)


entry = script_entry(main, __doc__)  # the installed command `bert-run-multiple-choice`

if __name__ == "__main__":
    entry()
