"""Reading the pretraining corpus into documents of tokenized sentences, in parallel.

Input format (the original's): one sentence per line, blank lines between documents. As in the
original, documents run on across input files, each line is `strip()`-ed before tokenizing, and
lines that tokenize to nothing are dropped. Tokenization runs in `num_workers` processes; the
order of sentences, and so the output, does not depend on the number of workers.
"""

import array
import multiprocessing
import os
import signal

from bert_realformer import storage
from bert_realformer.text_files import decode_line
from tokenization.chinese import ContinuationToken, JiebaSegmenter, apply_reference_positions, read_reference_file
from tokenization.vocabularies import tokenizer_for

BLANK = None  # a document break in the stream of sentences
CHUNK_LINES = 2000


class LineTokenizer:
    """A stripped line (with optional reference positions) -> `array('i')` of ids, where a CJK
    character that continues a word is stored as `-(id + 1)` (see `pretraining.instances`). The
    tokenizer is the one `vocab_file` names (`tokenization.vocabularies`); Chinese word
    segmentation needs WordPiece's."""

    def __init__(self, vocab_file, do_lower_case, chinese_word_segmentation=None):
        self.tokenizer = tokenizer_for(vocab_file, do_lower_case=do_lower_case)
        self.segmenter = JiebaSegmenter() if chinese_word_segmentation == "jieba" else None

    def __call__(self, line, ref_positions=None, where=None):
        if self.segmenter is None and ref_positions is None:
            return array.array("i", self.tokenizer.tokenize_to_ids(line))
        tokens = self.tokenizer.tokenize(line)
        if self.segmenter is not None:
            tokens = self.segmenter(line, tokens)
        elif ref_positions is not None:
            tokens = apply_reference_positions(tokens, ref_positions, where)
        vocab = self.tokenizer.vocab
        return array.array("i", [-vocab[t] - 1 if isinstance(t, ContinuationToken) else vocab[t]
                                 for t in tokens])


_worker_tokenizer = None


def _init_worker(args):
    """args: (vocab_file, do_lower_case, chinese_word_segmentation or None)."""
    global _worker_tokenizer
    _worker_tokenizer = LineTokenizer(*args)


def _tokenize_chunk(chunk):
    """[(line or BLANK, ref positions or None, where)] -> [array or BLANK]."""
    return [BLANK if line is BLANK else _worker_tokenizer(line, ref, where)
            for line, ref, where in chunk]


def _line_chunks(input_files, ref_files):
    """Chunks of (stripped line or BLANK, reference positions, 'file:line') in corpus order."""
    chunk = []
    for index, path in enumerate(input_files):
        refs = iter(read_reference_file(ref_files[index])) if ref_files else None
        with storage.open_file(path) as f:
            for number, raw in enumerate(f, start=1):  # binary lines split on b"\n" only
                line = decode_line(raw, path, number).strip()
                ref, where = None, None
                if not line:
                    line = BLANK
                elif refs is not None:
                    ref_entry = next(refs, None)
                    if ref_entry is None:
                        raise ValueError(f"{ref_files[index]}: has fewer lines than the non-blank "
                                         f"lines of {path} (ran out at {path}:{number})")
                    where, ref = f"{ref_files[index]}:{ref_entry[0]}", ref_entry[1]
                chunk.append((line, ref, where))
                if len(chunk) >= CHUNK_LINES:
                    yield chunk
                    chunk = []
        if refs is not None and next(refs, None) is not None:
            raise ValueError(f"{ref_files[index]}: has more lines than the non-blank lines of {path}")
    if chunk:
        yield chunk


def worker_pool(tokenizer_args, num_workers):
    """A process pool whose workers hold the line tokenizer (None for one worker).

    The tokenizer is built once here and inherited by forked workers (its tables take a moment
    to build); where fork is not available each worker builds its own.
    """
    _init_worker(tokenizer_args)
    if num_workers <= 1:
        return None
    if os.name == "posix":
        # Forked workers would inherit the script's SIGTERM handler (bert_realformer.commandline.runner), and a
        # worker that does not die when the pool terminates it keeps the pool waiting.
        return multiprocessing.get_context("fork").Pool(num_workers, initializer=_default_sigterm)
    return multiprocessing.get_context("spawn").Pool(num_workers, initializer=_init_worker,
                                                     initargs=(tokenizer_args,))


def _default_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def finish_pool(pool) -> None:
    """Lets the workers of `pool` (None: nothing) exit once its work is all collected, and waits
    for them. `Pool.terminate` is kept for leaving in the middle of work: with idle workers it can
    wait forever on a lock a worker held when it was killed (CPython issues 78178, 96995)."""
    if pool is not None:
        pool.close()
        pool.join()


def tokenized_lines(input_files, pool=None, ref_files=None):
    """Yields, in corpus order, one `array('i')` per non-blank line, or BLANK for a blank line,
    tokenized by `pool` (from `worker_pool`), or in this process when it is None."""
    chunks = _line_chunks(input_files, ref_files)
    results = map(_tokenize_chunk, chunks) if pool is None else pool.imap(_tokenize_chunk, chunks)
    for result in results:
        yield from result


def read_documents(lines, on_sentence=None):
    """Groups a stream from `tokenized_lines` into documents (lists of non-empty sentences),
    dropping empty documents. `on_sentence(n_tokens)` is called per line (progress)."""
    documents = [[]]
    for sentence in lines:
        if sentence is BLANK:
            documents.append([])
        elif len(sentence):
            documents[-1].append(sentence)
        if on_sentence is not None:
            on_sentence(0 if sentence is BLANK else len(sentence))
    return [d for d in documents if d]
