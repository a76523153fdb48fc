"""Creates MLM/NSP pretraining TFRecords from raw text, as the original create_pretraining_data.py.

Same flags, defaults, algorithm and records: for the same input, vocab, flags and seed the
instances are the original's, in the same order. Beyond the original: parallel tokenization
(`--num_workers`), memory-bounded `--shard_mode`, Chinese whole-word masking
(`--chinese_word_segmentation=jieba` or `--chinese_ref_file`), no-NSP data (`--no_nsp`), ALBERT's
sentence-order pairs (`--sentence_order`), and `--vocab_file` naming a SentencePiece model
(`spiece.model`) or a byte-level BPE `vocab.json` as well as WordPiece's vocab.txt.

    python create_pretraining_data.py --input_file=corpus.txt --output_file=out.tfrecord \\
      --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \\
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
"""

import sys

from absl import flags

from bert_realformer.commandline.runner import script_entry
from bert_realformer.cpus import usable_cpu_count
from bert_realformer.errors import InputError
from bert_realformer.file_patterns import expand_file_patterns
from bert_realformer.pretraining.creation import CreationOptions, check_options, create_pretraining_files

FLAGS = flags.FLAGS

# The original's flags.
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of files; globs allowed).")
flags.DEFINE_string("output_file", None, "Output TF example file (or comma-separated list of files).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are shorter than the maximum "
                   "length.")

# Ours.
flags.DEFINE_integer("num_workers", usable_cpu_count(), "Processes that tokenize the input in parallel (the "
                     "output does not depend on it). Default: the CPUs this process may run on (affinity, cgroup "
                     "quota).")
flags.DEFINE_bool("shard_mode", False, "Process input files one at a time, each into its own output file "
                  "DIR/<input name>.tfrecord with --output_file=DIR and seed random_seed + file index, so "
                  "that peak memory follows the largest input file. Random next sentences come from the same file.")
flags.DEFINE_enum("chinese_word_segmentation", "none", ["none", "jieba"], "Chinese whole-word masking: segment lines "
                  "with jieba and mask multi-character words together (needs --do_whole_word_mask).")
flags.DEFINE_string("chinese_ref_file", None, "Chinese whole-word masking from reference files in the format of "
                    "Hugging Face's run_chinese_ref.py, one per input file (comma-separated; needs "
                    "--do_whole_word_mask).")
flags.DEFINE_bool("no_nsp", False, "RoBERTa-style data without next-sentence prediction: each instance is [CLS] + "
                  "contiguous sentences of one document + [SEP], segment ids 0, next_sentence_labels 0.")
flags.DEFINE_bool("sentence_order", False, "ALBERT's sentence-order prediction: B is always the text that follows A "
                  "in its document, and half the time the two are swapped (next_sentence_labels 1: swapped); a chunk "
                  "of one sentence takes its B from another document, as google-research/albert's does.")
flags.DEFINE_bool("dynamic_masking", False, "Write unmasked records (the real tokens and the word grouping that "
                  "--do_whole_word_mask defines) that run_pretraining.py masks anew as it reads them: other masks in "
                  "every epoch, so --dupe_factor=1 suffices. With --no_nsp the records hold no next_sentence_labels.")
flags.DEFINE_bool("use_native", True, "Make the instances and records with the compiled C module "
                  "(pretraining/_native.c) where it was built; the output is the same. False: the pure-Python path.")
flags.DEFINE_bool("progress", None, "Show a progress line (default: when stderr is a terminal).")


def _options():
    return CreationOptions(
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case, do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor, masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob, num_workers=FLAGS.num_workers, shard_mode=FLAGS.shard_mode,
        chinese_word_segmentation=FLAGS.chinese_word_segmentation,
        chinese_ref_files=tuple(FLAGS.chinese_ref_file.split(",")) if FLAGS.chinese_ref_file else None,
        no_nsp=FLAGS.no_nsp, sentence_order=FLAGS.sentence_order, dynamic_masking=FLAGS.dynamic_masking,
        use_native=FLAGS.use_native,
        show_progress=sys.stderr.isatty() if FLAGS.progress is None else FLAGS.progress)


def main(argv):
    del argv
    input_files = expand_file_patterns(FLAGS.input_file, "input_file")
    for name in ("output_file", "vocab_file"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    options = _options()
    check_options(options, input_files, FLAGS.output_file)
    summary = create_pretraining_files(input_files, FLAGS.output_file, options)
    for output in summary.outputs:
        print(f"wrote {output}", file=sys.stderr)
    masked = ("unmasked (masked when read)" if options.dynamic_masking else
              f"{summary.masked:,} masked ({summary.masked / max(summary.tokens, 1):.1%})")
    print(f"{len(input_files)} input files, {summary.lines:,} lines, {summary.documents:,} documents -> "
          f"{summary.instances:,} instances, {summary.tokens:,} tokens, {masked}, {summary.seconds:.1f} s",
          file=sys.stderr)


entry = script_entry(main, __doc__)  # the installed command `bert-create-pretraining-data`

if __name__ == "__main__":
    entry()
