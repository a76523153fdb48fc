"""Raw text -> MLM/NSP pretraining TFRecords: what create_pretraining_data.py runs, behind a
`CreationOptions` (the script keeps the flags and turns them into one).

    options = CreationOptions(vocab_file="vocab.txt", max_seq_length=128, ...)
    check_options(options, input_files, output_spec)
    summary = create_pretraining_files(input_files, output_spec, options)

One corpus (or, with `shard_mode`, each input file alone) is tokenized in worker processes
(`documents`), made into instances and records (`native` where the C module is built, else
`instances` and `records`) and written under temporary names that are renamed when the whole
run succeeded. No TensorFlow.
"""

import dataclasses
import gc
import os
import random
import sys
import time

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import check_text_file
from tokenization.vocabularies import vocabulary_kind


@dataclasses.dataclass(frozen=True)
class CreationOptions:
    """The original script's options and ours (see create_pretraining_data.py's flags)."""
    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    num_workers: int = 1
    shard_mode: bool = False
    chinese_word_segmentation: str = "none"   # none | jieba
    chinese_ref_files: tuple[str, ...] | None = None
    no_nsp: bool = False
    sentence_order: bool = False   # ALBERT's sentence-order pairs instead of next-sentence ones
    dynamic_masking: bool = False   # unmasked records with their word grouping (masked when read)
    use_native: bool = True
    show_progress: bool = False


@dataclasses.dataclass
class Summary:
    """What a run wrote and counted."""
    outputs: list[str]
    lines: int
    documents: int
    instances: int
    masked: int
    tokens: int
    seconds: float


def check_options(options: CreationOptions, input_files: list[str], output_spec: str) -> None:
    """One-line `InputError`s naming the option, for files missing and options inconsistent.
    (Each number's own range is the scripts' flag table, `flag_ranges`, checked as they parse.)"""
    if not storage.isfile(options.vocab_file):
        raise InputError(f"vocab_file={options.vocab_file}: no such file", options=("vocab_file",))
    if storage.size(options.vocab_file) == 0:
        raise InputError(f"vocab_file={options.vocab_file}: the file is empty", options=("vocab_file",))
    # Short targets are drawn from [2, max_num_tokens]: room for two tokens besides [CLS] and [SEP]s.
    minimum = 4 if options.no_nsp else 5
    if options.max_seq_length < minimum:
        layout = "[CLS] A [SEP]" if options.no_nsp else "[CLS] A [SEP] B [SEP]"
        raise InputError(f"max_seq_length={options.max_seq_length} is too small for {layout}: "
                         f"at least {minimum} is needed", options=("max_seq_length",))
    if options.sentence_order and options.no_nsp:
        raise InputError("no_nsp makes instances without a sentence B, whose order sentence_order would predict: "
                         "give one", options=("no_nsp", "sentence_order"))
    segmenting = options.chinese_word_segmentation != "none"
    kind = vocabulary_kind(options.vocab_file)
    if (segmenting or options.chinese_ref_files) and kind != "wordpiece":
        raise InputError(f"vocab_file={options.vocab_file}: Chinese word segmentation marks WordPiece tokens; a "
                         f"{kind} vocabulary has its own words", options=("vocab_file", "chinese_word_segmentation"))
    if segmenting and options.chinese_ref_files:
        raise InputError("chinese_word_segmentation and chinese_ref_file are alternatives; give one",
                         options=("chinese_word_segmentation", "chinese_ref_file"))
    if (segmenting or options.chinese_ref_files) and not options.do_whole_word_mask:
        raise InputError("Chinese word segmentation only changes whole-word masking: "
                         "add do_whole_word_mask=True", options=("do_whole_word_mask",))
    if options.chinese_ref_files:
        if len(options.chinese_ref_files) != len(input_files):
            raise InputError(f"chinese_ref_file names {len(options.chinese_ref_files)} files for "
                             f"{len(input_files)} input files", options=("chinese_ref_file",))
        for ref in options.chinese_ref_files:
            if not storage.isfile(ref):
                raise InputError(f"chinese_ref_file: {ref}: no such file", options=("chinese_ref_file",))
    if options.shard_mode:
        names = [os.path.splitext(os.path.basename(p))[0] for p in input_files]
        if len(set(names)) != len(names):
            raise InputError("shard_mode: input files must have distinct base names", options=("shard_mode",))
        storage.check_dir_target(output_spec, "output_file")
        # (the directory itself is made once the inputs are known to be good: a refused run leaves none)
        output_dirs = [output_spec if storage.isdir(output_spec) else os.path.dirname(output_spec.rstrip("/")) or "."]
    elif any(not p.strip() for p in output_spec.split(",")):
        raise InputError(f"output_file={output_spec}: empty file name in the list", options=("output_file",))
    else:
        for path in output_spec.split(","):
            storage.check_file_target(path, "output_file")
        output_dirs = sorted({os.path.dirname(p) or "." for p in output_spec.split(",")})
    for directory in output_dirs:  # before tokenizing: a failed write would come after all of it
        storage.check_writable_dir(directory, "output_file")


class TokenizingProgress:
    """Lines and tokens read so far, shown (when `enabled`) as a line on stderr redrawn at
    most twice a second."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.start = time.time()
        self.lines = self.tokens = 0
        self._shown = 0.0

    def sentence(self, n_tokens: int) -> None:
        self.lines += 1
        self.tokens += n_tokens
        if self.enabled and time.time() - self._shown > 0.5:
            self._shown = time.time()
            rate = self.lines / max(self._shown - self.start, 1e-9)
            sys.stderr.write(f"\rtokenizing: {self.lines:,} lines, {self.tokens:,} tokens, {rate:,.0f} lines/s")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def create_pretraining_files(input_files: list[str], output_spec: str, options: CreationOptions) -> Summary:
    """Writes the records of `input_files` to the files of `output_spec` (comma-separated; with
    `shard_mode`, a directory that gets DIR/<input name>.tfrecord per input, seeded
    `random_seed + index`). Every input is read through once first, so a later file that cannot
    be read, is not UTF-8 or is blank stops the run before anything is written; outputs appear
    under their names only when every one of them is complete."""
    from bert_realformer.pretraining.instances import VocabIds
    try:
        vocab_ids = VocabIds.of(options.vocab_file, options.do_lower_case)
    except ValueError as error:
        raise InputError(f"vocab_file={options.vocab_file}: {error}", options=("vocab_file",)) from None
    progress = TokenizingProgress(options.show_progress)
    refs = list(options.chinese_ref_files) if options.chinese_ref_files else None
    if options.shard_mode:
        jobs = [([path], [os.path.join(output_spec, os.path.splitext(os.path.basename(path))[0] + ".tfrecord")],
                 options.random_seed + index, [refs[index]] if refs else None)
                for index, path in enumerate(input_files)]
    else:
        jobs = [(input_files, output_spec.split(","), options.random_seed, refs)]
    for path in input_files:
        check_text_file(path)
    totals = [0, 0, 0, 0]
    staged = []  # shard mode: (finished shard under a temporary name, its final name)
    made_dir = options.shard_mode and not storage.isdir(output_spec)
    try:
        if made_dir:
            storage.makedirs(output_spec)
        for inputs, outputs, seed, job_refs in jobs:
            temporaries = [f"{o}.shard-{os.getpid()}" for o in outputs] if options.shard_mode else outputs
            counts = _create(inputs, temporaries, seed, vocab_ids, progress, job_refs, options)
            staged.extend(zip(temporaries, outputs))
            totals = [a + b for a, b in zip(totals, counts)]
    except BaseException:
        for temporary, output in staged:
            if temporary != output:
                storage.remove(temporary)
        if made_dir:
            storage.rmtree(output_spec)
        raise
    for temporary, output in staged:
        storage.rename(temporary, output)
    documents, instances, masked, tokens = totals
    return Summary([output for _, output in staged], progress.lines, documents, instances, masked, tokens,
                   time.time() - progress.start)


def _create(input_files, output_files, seed, vocab_ids, progress, ref_files, options):
    """One corpus -> its output files. Returns (documents, instances, masked positions, tokens)."""
    from bert_realformer.pretraining import documents as docs
    from bert_realformer.pretraining import native
    from bert_realformer.pretraining.instances import MaskingOptions

    segmentation = None if options.chinese_word_segmentation == "none" else options.chinese_word_segmentation
    # (SentencePiece runs as a TensorFlow op, whose threads a forked worker would not have: one process)
    workers = 1 if vocabulary_kind(options.vocab_file) == "sentencepiece" else options.num_workers
    pool = docs.worker_pool((options.vocab_file, options.do_lower_case, segmentation), workers)
    try:
        try:
            documents = docs.read_documents(docs.tokenized_lines(input_files, pool, ref_files),
                                            on_sentence=progress.sentence)
        except ValueError as error:  # a reference file that does not fit the input
            raise InputError(str(error)) from None
        finally:
            progress.done()  # (ends the progress line, also before an error's)
        # (the C module masks as it goes and makes next-sentence pairs: unmasked records and
        # sentence-order pairs are made by the Python path)
        use_native = (options.use_native and native.available() and not options.dynamic_masking
                      and not options.sentence_order)
        if use_native or not documents:  # tokenization is done: free the workers' memory
            docs.finish_pool(pool)
            pool = None
        if not documents:
            raise InputError(f"input_file: {', '.join(input_files)} holds no text "
                             "(every line is blank or tokenizes to nothing)", options=("input_file",))
        masking = MaskingOptions(options.masked_lm_prob, options.max_predictions_per_seq,
                                 options.do_whole_word_mask, dynamic=options.dynamic_masking)
        if use_native:
            counts = _write_native(documents, output_files, seed, masking, vocab_ids, options)
        else:
            counts = _write_python(documents, output_files, seed, masking, vocab_ids, pool, options)
        docs.finish_pool(pool)
        pool = None
    finally:
        if pool is not None:  # left in the middle of work
            pool.terminate()
    return (len(documents), *counts)


def _write_native(documents, output_files, seed, masking, vocab_ids, options):
    """Instances and records made in C (`pretraining.native`). Returns (instances, masked, tokens)."""
    from bert_realformer.pretraining import native
    from bert_realformer.tfrecords import AtomicRecordWriters

    instances = native.create_training_instances(
        documents, options.max_seq_length, options.dupe_factor, options.short_seq_prob, masking,
        vocab_ids, random.Random(seed), no_nsp=options.no_nsp)
    with AtomicRecordWriters(output_files) as writers:
        for records, ends in native.encoded_chunks(instances, options.max_seq_length,
                                                   options.max_predictions_per_seq,
                                                   threads=options.num_workers):
            writers.write_framed(records, ends)
    return len(instances), len(instances.masked_ids), len(instances.ids)


def _write_python(documents, output_files, seed, masking, vocab_ids, pool, options):
    """The pure-Python path (no C module): `pool` serializes while this process makes the
    instances. Returns (instances, masked, tokens)."""
    from bert_realformer.pretraining.instances import create_training_instances
    from bert_realformer.pretraining.records import ParallelEncoder
    from bert_realformer.tfrecords import AtomicRecordWriters

    encoder = ParallelEncoder(pool, options.max_seq_length, options.max_predictions_per_seq,
                              mask_token_id=vocab_ids.mask, next_sentence=not options.no_nsp)
    counts = {"masked": 0, "tokens": 0}

    def encode(instance):
        counts["masked"] += len(instance.masked_lm_positions)
        counts["tokens"] += len(instance.input_ids)
        return encoder.add(instance)

    # Millions of small lists are made and kept: the cyclic garbage collector would rescan
    # them again and again (nothing here makes cycles).
    gc.disable()
    try:
        order = create_training_instances(documents, options.max_seq_length, options.dupe_factor,
                                          options.short_seq_prob, masking, vocab_ids,
                                          random.Random(seed), no_nsp=options.no_nsp, encode=encode,
                                          sentence_order=options.sentence_order)
        records = encoder.records()
    finally:
        gc.enable()
    with AtomicRecordWriters(output_files) as writers:
        for index in order:
            writers.write(records[index])
    return len(order), counts["masked"], counts["tokens"]
