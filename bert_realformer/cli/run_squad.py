"""SQuAD v1.1 / v2.0 fine-tuning and prediction, as the original run_squad.py.

    python run_squad.py --vocab_file=$CKPT/vocab.txt --bert_config_file=$CKPT/bert_config.json \\
      --init_checkpoint=$CKPT/bert_model.ckpt --do_train --train_file=train-v1.1.json \\
      --do_predict --predict_file=dev-v1.1.json --do_eval --max_seq_length=384 --doc_stride=128 \\
      --output_dir=out [--version_2_with_negative]

($CKPT: a released checkpoint's directory, such as uncased_L-12_H-768_A-12.) Writes
OUTPUT_DIR/predictions.json, nbest_predictions.json, null_odds.json (v2.0) and, with
--do_eval, eval_results.txt with the official scripts' scores.
"""

import dataclasses
import logging

from absl import flags

from bert_realformer import storage
from bert_realformer.commandline import finetuning_flags, training_flags
from bert_realformer.commandline.finetuning_flags import check_monitoring_flags
from bert_realformer.commandline.model_files import complete_model_files
from bert_realformer.commandline.runner import script_entry
from bert_realformer.commandline.training_flags import (
    define_foreign_vocab_flag,
    define_layerwise_flags,
    define_model_file_flags,
    define_monitoring_flags,
    define_order_and_padding_flags,
    define_shared_flags,
)
from bert_realformer.errors import InputError

FLAGS = flags.FLAGS
define_model_file_flags()
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
define_foreign_vocab_flag()
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_integer("max_seq_length", 384, "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the answers of --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate warmup for.")
flags.DEFINE_integer("n_best_size", 20, "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be generated.")
flags.DEFINE_bool("verbose_logging", False, "If true, all of the warnings related to data processing will be "
                  "printed (answers that cannot be mapped back onto the original text).")
flags.DEFINE_bool("version_2_with_negative", False, "If true, the SQuAD examples contain some that do not have an "
                  "answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "If null_score - best_non_null is greater than the threshold "
                   "predict null.")
flags.DEFINE_bool("do_eval", False, "Score the predictions of --predict_file against its answers (official EM/F1).")
flags.DEFINE_enum("eval_metric", "squad", ["squad", "cmrc2018"],
                  "--do_eval scoring: the official SQuAD scripts, or the CMRC 2018 script (Chinese).")
define_order_and_padding_flags()
define_shared_flags(adam_bias_correction=True)
define_monitoring_flags()
define_layerwise_flags()
flags.adopt_module_key_flags(training_flags)  # the shared flags in --help, not only --helpfull


def _check_flags():
    if not FLAGS.output_dir:
        raise InputError("--output_dir is required")
    complete_model_files()
    if not FLAGS.do_train and not FLAGS.do_predict:
        raise InputError("at least one of --do_train or --do_predict must be true")
    if FLAGS.do_train and not FLAGS.train_file:
        raise InputError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise InputError("--do_predict needs --predict_file")
    for name in ("train_file", "predict_file"):
        value = getattr(FLAGS, name)
        if value and not storage.isfile(value):
            raise InputError(f"--{name}={value}: no such file")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length} must exceed --max_query_length + 3")
    from bert_realformer.tasks.squad.metrics import reported_metrics
    check_monitoring_flags(FLAGS.do_predict and FLAGS.do_eval, "--do_predict --do_eval (the answers of "
                           "--predict_file)", reported_metrics(FLAGS.eval_metric, FLAGS.version_2_with_negative))


def main(argv):
    del argv
    if FLAGS.verbose_logging:
        logging.getLogger("bert_realformer.tasks.squad.reading").setLevel(logging.INFO)
    _check_flags()
    from bert_realformer.tasks import registry
    from bert_realformer.tasks.squad.task import SquadOptions
    squad = SquadOptions(
        train_file=FLAGS.train_file, predict_file=FLAGS.predict_file, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, do_lower_case=FLAGS.do_lower_case,
        version_2_with_negative=FLAGS.version_2_with_negative,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold, eval_metric=FLAGS.eval_metric)
    # (the predictions of --predict_file are the dev split where --do_eval scores them)
    run = finetuning_flags.finetuning_options()
    run = dataclasses.replace(run, plan=dataclasses.replace(run.plan, do_eval=FLAGS.do_predict and FLAGS.do_eval))
    finetuning_flags.run(registry.get("squad")(run.task, squad), run)


entry = script_entry(main, __doc__)  # the installed command `bert-run-squad`

if __name__ == "__main__":
    entry()
