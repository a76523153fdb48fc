"""Instance creation and record encoding through the C module `pretraining._native`.

The C code runs the algorithm of `pretraining.instances` on a flattened corpus with its own copy
of the `random.Random` state, so for the same documents, flags and generator it makes the same
instances in the same order, and leaves the generator in the same state. It is used only where
it was built (`pip install` compiles it; without a compiler the package still installs) and
where it draws exactly as this Python does (checked once, `available()`); otherwise callers use
the pure-Python path.

Instances come back as flat arrays (`InstanceArrays`), a few bytes per token instead of Python
objects, and are serialized to framed TFRecords in C, in parallel threads.
"""

import array
import concurrent.futures
import dataclasses
import functools
import logging
import random

import numpy as np

from bert_realformer.pretraining.instances import MaskingOptions, TrainingInstance, VocabIds
from bert_realformer.pretraining.instances import create_training_instances as python_create_training_instances

try:
    from bert_realformer.pretraining import _native
except ImportError:  # not compiled: the pure-Python path is used
    _native = None

logger = logging.getLogger(__name__)

RECORDS_PER_CHUNK = 4096


@dataclasses.dataclass
class InstanceArrays:
    """Instances in creation order; `order` lists them in output order.

    Instance i: `ids[offsets[i]:offsets[i+1]]` (int32, after masking, plain ids), of which the
    first `segment_a[i]` have segment id 0 and the rest 1; masked positions and their original
    ids `masked_positions` / `masked_ids[masked_offsets[i]:masked_offsets[i+1]]`, sorted by
    position; `random_next[i]` (uint8) is the next-sentence label. `offsets` and
    `masked_offsets` are int64 [n + 1]; `order` int64 [n].
    """
    ids: np.ndarray
    offsets: np.ndarray
    segment_a: np.ndarray
    masked_positions: np.ndarray
    masked_ids: np.ndarray
    masked_offsets: np.ndarray
    random_next: np.ndarray
    order: np.ndarray

    def __len__(self):
        return len(self.random_next)

    def instance(self, i):
        """Instance i (creation order) as a `TrainingInstance`."""
        start, end = self.offsets[i], self.offsets[i + 1]
        m_start, m_end = self.masked_offsets[i], self.masked_offsets[i + 1]
        n_a = int(self.segment_a[i])
        return TrainingInstance(self.ids[start:end].tolist(), [0] * n_a + [1] * (end - start - n_a),
                                self.masked_positions[m_start:m_end].tolist(),
                                self.masked_ids[m_start:m_end].tolist(), bool(self.random_next[i]))

    def in_output_order(self):
        return [self.instance(i) for i in self.order]


def _state_words(rng):
    version, state, gauss = rng.getstate()
    return array.array("I", state[:-1]).tobytes(), state[-1], (version, gauss)


def _set_state(rng, words, index, version_gauss):
    version, gauss = version_gauss
    rng.setstate((version, tuple(array.array("I", words)) + (index,), gauss))


@functools.lru_cache(maxsize=1)
def available():
    """True when the C module is built and draws exactly as this Python's `random.Random`
    (and as `pretraining.instances`) on a small corpus with every option."""
    if _native is None:  # not compiled: the pure-Python path, as documented
        return False
    if array.array("I").itemsize != 4:
        return _fallback("this platform's 32-bit arrays are not 4 bytes")
    rng = random.Random(7)
    kinds = [0, 1, 2, 3, 5, 7, 100, 1000, 2**31 - 1, 2**31, 2**32 - 1] * 70
    words, index, _ = _state_words(rng)
    values, _ = _native.random_draws(words, index, kinds)
    expected = [rng.random() if kind == 0 else rng._randbelow(kind) for kind in kinds]
    if values != expected:
        return _fallback("its random draws differ from this Python's random.Random")
    if not _agrees_on_sample_corpus():
        return _fallback("its instances differ from the Python path's on a sample corpus")
    return True


def _fallback(reason):
    """False, said once (`available` is cached): the output stays the same, only slower."""
    logger.warning("the compiled module pretraining/_native is built but not used: %s; making the "
                   "instances in pure Python (the same records, several times slower)", reason)
    return False


def _agrees_on_sample_corpus():
    sample = random.Random(11)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##c", "d", "[UNK]"])}
    documents = [[array.array("i", [sample.choice([4, 5, 6, 7, -6]) for _ in range(sample.randint(1, 9))])
                  for _ in range(sample.randint(1, 5))] for _ in range(12)]
    for whole_word in (False, True):
        for no_nsp in (False, True):
            masking = MaskingOptions(0.2, 5, whole_word)
            args = (16, 3, 0.3, masking, VocabIds(vocab))
            rng_python, rng_native = random.Random(3), random.Random(3)
            expected = python_create_training_instances([list(d) for d in documents], *args,
                                                        rng_python, no_nsp=no_nsp)
            made = create_training_instances(documents, *args, rng_native, no_nsp=no_nsp)
            if made.in_output_order() != expected or rng_native.getstate() != rng_python.getstate():
                return False
    return True


def create_training_instances(documents, max_seq_length, dupe_factor, short_seq_prob, masking,
                              vocab_ids, rng, no_nsp=False):
    """`pretraining.instances.create_training_instances` in C -> `InstanceArrays`.

    `documents`: non-empty lists of `array('i')` sentences (ids; `-(id + 1)` marks a word
    continuation), left unchanged. `rng` ends in the state the Python path leaves it in.
    """
    sentences = [s for document in documents for s in document]
    tokens = array.array("i")
    for sentence in sentences:
        tokens.extend(sentence)
    sentence_start = np.zeros(len(sentences) + 1, np.int64)
    np.cumsum([len(s) for s in sentences], out=sentence_start[1:])
    document_start = np.zeros(len(documents) + 1, np.int64)
    np.cumsum([len(d) for d in documents], out=document_start[1:])
    words, index, version_gauss = _state_words(rng)
    (words, index), *fields = _native.create_instances(
        tokens, sentence_start, document_start, np.asarray(vocab_ids.random_words, np.int32),
        vocab_ids.continuation_flags, words, index, max_seq_length, masking.max_predictions_per_seq,
        masking.masked_lm_prob, short_seq_prob, dupe_factor, masking.do_whole_word_mask, no_nsp,
        vocab_ids.cls, vocab_ids.sep, vocab_ids.mask)
    _set_state(rng, words, index, version_gauss)
    dtypes = (np.int32, np.int64, np.int32, np.int32, np.int32, np.int64, np.uint8, np.int64)
    return InstanceArrays(*(np.frombuffer(f, dtype) for f, dtype in zip(fields, dtypes)))


def encoded_chunks(instances, max_seq_length, max_predictions_per_seq, threads=1):
    """Yields (records, ends) for consecutive chunks of `instances.order`: the framed TFRecords
    concatenated, and where each ends. Chunks are encoded by `threads` threads, in order."""
    arrays = (instances.ids, instances.offsets, instances.segment_a, instances.masked_positions,
              instances.masked_ids, instances.masked_offsets, instances.random_next)

    def encode(start):
        order = instances.order[start:start + RECORDS_PER_CHUNK]
        records, ends = _native.encode_records(*arrays, np.ascontiguousarray(order),
                                               max_seq_length, max_predictions_per_seq)
        return records, np.frombuffer(ends, np.int64)

    starts = range(0, len(instances), RECORDS_PER_CHUNK)
    if threads <= 1:
        yield from map(encode, starts)
        return
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        pending = []
        for start in starts:
            pending.append(pool.submit(encode, start))
            if len(pending) > 2 * threads:  # bounded look-ahead: memory stays a few chunks
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()

