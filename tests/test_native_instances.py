"""The C instance maker (`pretraining.native`) against the pure-Python algorithm, which the
fixture tests tie to the original: same instances, same order, same generator state after, and
byte-identical records."""

import array
import os
import random

import numpy as np
import pytest

from bert_realformer.pretraining import instances as python_path
from bert_realformer.pretraining import native
from bert_realformer.pretraining.instances import MaskingOptions, VocabIds
from bert_realformer.pretraining.records import instance_to_example
from bert_realformer.tfrecords import frame_record

if not native.available():
    if os.environ.get("REQUIRE_NATIVE"):
        raise RuntimeError("bert_realformer.pretraining._native is not built or disagrees with random.Random")
    pytest.skip("bert_realformer.pretraining._native is not built", allow_module_level=True)

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat", "on", "mat",
          "##ting", "a", "dog", "##gy", "ran"]
VOCAB = VocabIds({t: i for i, t in enumerate(TOKENS)})
WORDS = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]


def random_corpus(seed, n_documents, max_sentences=8, max_tokens=12, cjk_marks=True):
    """Documents of `array('i')` sentences; some ids are `-(id + 1)` continuation marks, and
    now and then a literal [SEP]/[CLS] id inside a sentence (as the general path allows)."""
    draw = random.Random(seed)
    pool = WORDS + ([-6, -13] if cjk_marks else []) + [2, 3]
    return [[array.array("i", [draw.choice(pool) for _ in range(draw.randint(1, max_tokens))])
             for _ in range(draw.randint(1, max_sentences))] for _ in range(n_documents)]


def both_paths(documents, max_seq_length, dupe_factor, short_seq_prob, masking, seed, no_nsp):
    rng_python, rng_native = random.Random(seed), random.Random(seed)
    expected = python_path.create_training_instances(
        [list(d) for d in documents], max_seq_length, dupe_factor, short_seq_prob, masking, VOCAB,
        rng_python, no_nsp=no_nsp)
    made = native.create_training_instances(documents, max_seq_length, dupe_factor,
                                            short_seq_prob, masking, VOCAB, rng_native,
                                            no_nsp=no_nsp)
    return expected, made, rng_python, rng_native


CASES = [
    # (seed, documents, max_seq_length, dupe, short_seq_prob, masked_lm_prob, max_predictions, wwm)
    (0, 30, 32, 3, 0.1, 0.15, 5, False),
    (1, 30, 32, 3, 0.1, 0.15, 5, True),
    (2, 1, 16, 4, 0.5, 0.15, 3, False),     # one document: B comes from itself
    (3, 40, 5, 2, 0.0, 0.5, 2, True),       # the smallest [CLS] A [SEP] B [SEP]
    (4, 25, 64, 2, 1.0, 1.0, 80, True),     # always short targets, mask as much as allowed
    (5, 25, 128, 2, 0.1, 0.15, 20, False),  # long sequences, little truncation
]


@pytest.mark.parametrize("no_nsp", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_same_instances_order_and_generator_state(case, no_nsp):
    seed, n_documents, max_seq_length, dupe, short, prob, max_predictions, wwm = case
    documents = random_corpus(seed, n_documents)
    masking = MaskingOptions(prob, max_predictions, wwm)
    expected, made, rng_python, rng_native = both_paths(documents, max_seq_length, dupe, short,
                                                        masking, seed, no_nsp)
    assert len(made) == len(expected) > 0
    assert made.in_output_order() == expected
    assert rng_native.getstate() == rng_python.getstate()
    assert rng_native.random() == rng_python.random()


def test_smallest_no_nsp_length_with_always_short_targets():
    """max_seq_length 4 without NSP: short targets are randint(2, 2), on both paths."""
    masking = MaskingOptions(0.5, 2, False)
    expected, made, rng_python, rng_native = both_paths(random_corpus(8, 20), 4, 2, 1.0, masking, 8, True)
    assert made.in_output_order() == expected and len(expected) > 0
    assert all(len(instance.input_ids) <= 4 for instance in expected)
    assert rng_native.getstate() == rng_python.getstate()


@pytest.mark.parametrize("no_nsp,max_seq_length", [(True, 3), (False, 4)])
def test_lengths_without_room_for_short_targets_are_refused_not_looped(no_nsp, max_seq_length):
    """randint(2, max_num_tokens) would have an empty range: an error on both paths, never a hang."""
    masking = MaskingOptions()
    with pytest.raises(ValueError, match="out of range"):
        native.create_training_instances(random_corpus(9, 3), max_seq_length, 1, 1.0, masking, VOCAB,
                                         random.Random(0), no_nsp=no_nsp)
    with pytest.raises(ValueError, match="empty range"):
        python_path.create_training_instances([list(d) for d in random_corpus(9, 3)], max_seq_length, 1, 1.0,
                                              masking, VOCAB, random.Random(0), no_nsp=no_nsp)


def test_documents_are_left_as_they_were():
    documents = random_corpus(7, 10)
    copy = [[array.array("i", s) for s in d] for d in documents]
    native.create_training_instances(documents, 32, 2, 0.1, MaskingOptions(), VOCAB,
                                     random.Random(1))
    assert documents == copy


@pytest.mark.parametrize("threads", [1, 2])
def test_records_are_byte_identical_to_the_python_encoder(monkeypatch, threads):
    monkeypatch.setattr(native, "RECORDS_PER_CHUNK", 7)  # several chunks, one partial
    documents = random_corpus(8, 12)
    made = native.create_training_instances(documents, 48, 2, 0.1, MaskingOptions(0.15, 6, True),
                                            VOCAB, random.Random(5))
    expected = b"".join(frame_record(instance_to_example(instance, 48, 6))
                        for instance in made.in_output_order())
    chunks = list(native.encoded_chunks(made, 48, 6, threads=threads))
    assert len(chunks) == -(-len(made) // 7)
    assert b"".join(records for records, _ in chunks) == expected
    for records, ends in chunks:  # ends: where each framed record ends
        assert ends[-1] == len(records)
        starts = np.concatenate([[0], ends[:-1]])
        lengths = [int.from_bytes(records[s:s + 8], "little") for s in starts]
        assert np.array_equal(ends - starts, np.array(lengths) + 16)


def test_random_draws_follow_random_random_across_regenerations():
    rng = random.Random(2024)
    rng.random()
    kinds = [0, 1, 2, 3, 6, 1000, 2**20 + 1, 2**31, 2**32 - 1] * 300  # over 2 x 624 words
    version, state, gauss = rng.getstate()
    values, (words, index) = native._native.random_draws(array.array("I", state[:-1]).tobytes(),
                                                         state[-1], kinds)
    expected = [rng.random() if kind == 0 else rng._randbelow(kind) for kind in kinds]
    assert values == expected
    assert (version, tuple(array.array("I", words)) + (index,), gauss) == rng.getstate()


def test_bad_corpus_buffers_are_refused():
    masking = MaskingOptions()
    with pytest.raises(ValueError, match="at least one sentence"):
        native.create_training_instances([[]], 32, 1, 0.1, masking, VOCAB, random.Random(0))
    with pytest.raises(ValueError, match="between 1 and"):
        native.create_training_instances([], 32, 1, 0.1, masking, VOCAB, random.Random(0))


def test_a_built_module_that_disagrees_is_not_used_and_says_so_once(caplog):
    """The pure-Python path makes the same records, 8x slower: the fallback is worth a line."""
    import pytest

    from bert_realformer.pretraining import native
    native.available.cache_clear()
    try:
        with (pytest.MonkeyPatch.context() as patch,
              caplog.at_level("WARNING", logger="bert_realformer.pretraining.native")):
            patch.setattr(native._native, "random_draws", lambda words, index, kinds: ([0] * len(kinds), None))
            assert native.available() is False and native.available() is False
    finally:
        native.available.cache_clear()
    assert caplog.text.count("built but not used: its random draws differ") == 1
    assert native.available() is True
