"""Creates MLM/NSP pretraining TFRecords from raw text, as the original create_pretraining_data.py.

Same flags, defaults, algorithm and records: for the same input, vocab, flags and seed the
instances are the original's, in the same order. Beyond the original: parallel tokenization
(`--num_workers`), memory-bounded `--shard_mode`, Chinese whole-word masking
(`--chinese_word_segmentation=jieba` or `--chinese_ref_file`), no-NSP data (`--no_nsp`).

    python create_pretraining_data.py --input_file=corpus.txt --output_file=out.tfrecord \\
      --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \\
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
"""

import gc
import os
import random
import sys
import time

from absl import flags

from bert_realformer import storage
from bert_realformer.cli import run
from bert_realformer.cpus import usable_cpu_count
from bert_realformer.errors import InputError
from bert_realformer.text_files import check_text_file

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
flags.DEFINE_bool("use_native", True, "Make the instances and records with the compiled C module "
                  "(pretraining/_native.c) where it was built; the output is the same. False: the pure-Python path.")
flags.DEFINE_bool("progress", None, "Show a progress line (default: when stderr is a terminal).")


def _check_flags(input_files):
    if not FLAGS.output_file:
        raise InputError("--output_file is required")
    if not FLAGS.vocab_file:
        raise InputError("--vocab_file is required")
    if not storage.isfile(FLAGS.vocab_file):
        raise InputError(f"--vocab_file={FLAGS.vocab_file}: no such file")
    if storage.size(FLAGS.vocab_file) == 0:
        raise InputError(f"--vocab_file={FLAGS.vocab_file}: the file is empty")
    # Short targets are drawn from [2, max_num_tokens]: room for two tokens besides [CLS] and [SEP]s.
    minimum = 4 if FLAGS.no_nsp else 5
    if FLAGS.max_seq_length < minimum:
        layout = "[CLS] A [SEP]" if FLAGS.no_nsp else "[CLS] A [SEP] B [SEP]"
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length} is too small for {layout}: "
                         f"at least {minimum} is needed")
    if FLAGS.max_predictions_per_seq < 1:
        raise InputError(f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}: must be at least 1")
    if not 0 < FLAGS.masked_lm_prob <= 1:
        raise InputError(f"--masked_lm_prob={FLAGS.masked_lm_prob}: must be in (0, 1]")
    if not 0 <= FLAGS.short_seq_prob <= 1:
        raise InputError(f"--short_seq_prob={FLAGS.short_seq_prob}: must be in [0, 1]")
    if FLAGS.dupe_factor < 1:
        raise InputError(f"--dupe_factor={FLAGS.dupe_factor}: must be at least 1")
    chinese = FLAGS.chinese_word_segmentation != "none" or FLAGS.chinese_ref_file
    if FLAGS.chinese_word_segmentation != "none" and FLAGS.chinese_ref_file:
        raise InputError("--chinese_word_segmentation and --chinese_ref_file are alternatives; give one")
    if chinese and not FLAGS.do_whole_word_mask:
        raise InputError("Chinese word segmentation only changes whole-word masking: "
                         "add --do_whole_word_mask=True")
    if FLAGS.chinese_ref_file:
        refs = FLAGS.chinese_ref_file.split(",")
        if len(refs) != len(input_files):
            raise InputError(f"--chinese_ref_file names {len(refs)} files for {len(input_files)} input files")
        for ref in refs:
            if not storage.isfile(ref):
                raise InputError(f"--chinese_ref_file: {ref}: no such file")
    if FLAGS.shard_mode:
        names = [os.path.splitext(os.path.basename(p))[0] for p in input_files]
        if len(set(names)) != len(names):
            raise InputError("--shard_mode: input files must have distinct base names")
    elif any(not p.strip() for p in FLAGS.output_file.split(",")):
        raise InputError(f"--output_file={FLAGS.output_file}: empty file name in the list")


class Progress:
    """A progress line on stderr (lines, tokens, rate) and the final summary's counters."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.time()
        self.lines = self.tokens = 0
        self._shown = 0.0

    def sentence(self, n_tokens):
        self.lines += 1
        self.tokens += n_tokens
        if self.enabled and time.time() - self._shown > 0.5:
            self._shown = time.time()
            rate = self.lines / max(self._shown - self.start, 1e-9)
            sys.stderr.write(f"\rtokenizing: {self.lines:,} lines, {self.tokens:,} tokens, {rate:,.0f} lines/s")
            sys.stderr.flush()

    def done(self):
        if self.enabled:
            sys.stderr.write("\n")


def _create(input_files, output_files, seed, vocab_ids, progress, ref_files):
    """One corpus -> its output files. Returns (documents, instances, masked positions, tokens)."""
    from pretraining import documents as docs
    from pretraining import native
    from pretraining.instances import MaskingOptions

    segmentation = None if FLAGS.chinese_word_segmentation == "none" else FLAGS.chinese_word_segmentation
    pool = docs.worker_pool((FLAGS.vocab_file, FLAGS.do_lower_case, segmentation), FLAGS.num_workers)
    try:
        try:
            documents = docs.read_documents(docs.tokenized_lines(input_files, pool, ref_files),
                                            on_sentence=progress.sentence)
        except ValueError as error:  # a reference file that does not fit the input
            raise InputError(str(error)) from None
        progress.done()
        if not documents:
            raise InputError(f"--input_file: {', '.join(input_files)} holds no text "
                             "(every line is blank or tokenizes to nothing)")
        masking = MaskingOptions(FLAGS.masked_lm_prob, FLAGS.max_predictions_per_seq,
                                 FLAGS.do_whole_word_mask)
        if FLAGS.use_native and native.available():
            if pool is not None:  # tokenization is done: free the workers' memory
                pool.terminate()
                pool = None
            counts = _write_native(documents, output_files, seed, masking, vocab_ids)
        else:
            counts = _write_python(documents, output_files, seed, masking, vocab_ids, pool)
    finally:
        if pool is not None:
            pool.terminate()
    return (len(documents), *counts)


def _write_native(documents, output_files, seed, masking, vocab_ids):
    """Instances and records made in C (`pretraining.native`). Returns (instances, masked, tokens)."""
    from bert_realformer.tfrecords import AtomicRecordWriters
    from pretraining import native

    instances = native.create_training_instances(
        documents, FLAGS.max_seq_length, FLAGS.dupe_factor, FLAGS.short_seq_prob, masking,
        vocab_ids, random.Random(seed), no_nsp=FLAGS.no_nsp)
    with AtomicRecordWriters(output_files) as writers:
        for records, ends in native.encoded_chunks(instances, FLAGS.max_seq_length,
                                                   FLAGS.max_predictions_per_seq,
                                                   threads=FLAGS.num_workers):
            writers.write_framed(records, ends)
    return len(instances), len(instances.masked_ids), len(instances.ids)


def _write_python(documents, output_files, seed, masking, vocab_ids, pool):
    """The pure-Python path (no C module): `pool` serializes while this process makes the
    instances. Returns (instances, masked, tokens)."""
    from bert_realformer.tfrecords import AtomicRecordWriters
    from pretraining.instances import create_training_instances
    from pretraining.records import ParallelEncoder

    encoder = ParallelEncoder(pool, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
    counts = {"masked": 0, "tokens": 0}

    def encode(instance):
        counts["masked"] += len(instance.masked_lm_positions)
        counts["tokens"] += len(instance.input_ids)
        return encoder.add(instance)

    # Millions of small lists are made and kept: the cyclic garbage collector would rescan
    # them again and again (nothing here makes cycles).
    gc.disable()
    try:
        order = create_training_instances(documents, FLAGS.max_seq_length, FLAGS.dupe_factor,
                                          FLAGS.short_seq_prob, masking, vocab_ids,
                                          random.Random(seed), no_nsp=FLAGS.no_nsp, encode=encode)
        records = encoder.records()
    finally:
        gc.enable()
    with AtomicRecordWriters(output_files) as writers:
        for index in order:
            writers.write(records[index])
    return len(order), counts["masked"], counts["tokens"]


def main(argv):
    del argv
    input_files = storage.expand_file_patterns(FLAGS.input_file, "--input_file")
    _check_flags(input_files)
    from pretraining.instances import VocabIds
    from tokenization.reference import load_vocab
    try:
        vocab_ids = VocabIds(load_vocab(FLAGS.vocab_file))
    except ValueError as error:
        raise InputError(f"--vocab_file={FLAGS.vocab_file}: {error}") from None

    show = sys.stderr.isatty() if FLAGS.progress is None else FLAGS.progress
    progress = Progress(show)
    ref_files = FLAGS.chinese_ref_file.split(",") if FLAGS.chinese_ref_file else None
    if FLAGS.shard_mode:
        jobs = []
        for index, path in enumerate(input_files):
            name = os.path.splitext(os.path.basename(path))[0] + ".tfrecord"
            jobs.append(([path], [os.path.join(FLAGS.output_file, name)], FLAGS.random_seed + index,
                         [ref_files[index]] if ref_files else None))
    else:
        jobs = [(input_files, FLAGS.output_file.split(","), FLAGS.random_seed, ref_files)]

    # Every input is read through once before anything is written: a later file that cannot be
    # read, is not UTF-8 or is blank stops the run here, not after earlier shards were written.
    for path in input_files:
        check_text_file(path)
    totals = [0, 0, 0, 0]
    staged = []  # shard mode: (finished shard under a temporary name, its final name)
    try:
        for inputs, outputs, seed, refs in jobs:
            temporaries = [f"{o}.shard-{os.getpid()}" for o in outputs] if FLAGS.shard_mode else outputs
            counts = _create(inputs, temporaries, seed, vocab_ids, progress, refs)
            staged.extend(zip(temporaries, outputs))
            totals = [a + b for a, b in zip(totals, counts)]
    except BaseException:
        for temporary, output in staged:
            if temporary != output:
                storage.remove(temporary)
        raise
    for temporary, output in staged:
        storage.rename(temporary, output)
        print(f"wrote {output}", file=sys.stderr)
    n_documents, n_instances, masked, tokens = totals
    seconds = time.time() - progress.start
    print(f"{len(input_files)} input files, {progress.lines:,} lines, {n_documents:,} documents -> "
          f"{n_instances:,} instances, {tokens:,} tokens, {masked:,} masked "
          f"({masked / max(tokens, 1):.1%}), {seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    run(main)
