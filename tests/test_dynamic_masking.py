"""Dynamic masking: unmasked records (create_pretraining_data.py --dynamic_masking) and the
masks drawn as they are read, on real Chinese text (People's Daily, whole words by jieba)."""

import collections
import math
import os

import jieba
import numpy as np
import pytest
import tensorflow as tf
from test_create_pretraining_data import INPUT, VOCAB_EN, VOCAB_ZH

from bert_realformer.pretraining.creation import CreationOptions, create_pretraining_files
from bert_realformer.pretraining.dynamic_masking import EVAL_SEED, DynamicMasking, mask_batch, number_to_predict
from bert_realformer.pretraining.input_pipeline import make_dataset, one_pass_dataset, record_layout
from bert_realformer.pretraining.records import unmasked_feature_spec
from tokenization import FullTokenizer

SEQ, PREDICTIONS = 128, 20
ZH_TOKENS = FullTokenizer(VOCAB_ZH).vocab
CLS, SEP, MASK = ZH_TOKENS["[CLS]"], ZH_TOKENS["[SEP]"], ZH_TOKENS["[MASK]"]
MASKING = DynamicMasking(0.15, PREDICTIONS, vocab_size=len(ZH_TOKENS), seed=7)


def _create(path, input_file, vocab, **options):
    settings = dict(vocab_file=vocab, max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1,
                    dynamic_masking=True, num_workers=1, random_seed=3)
    create_pretraining_files([input_file], path, CreationOptions(**{**settings, **options}))
    return path


def _parse(path, next_sentence):
    spec = unmasked_feature_spec(SEQ, next_sentence)
    rows = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(path)]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


@pytest.fixture(scope="module")
def chinese_records(tmp_path_factory):
    from bert_realformer import realdata
    directory = tmp_path_factory.mktemp("zh")
    corpus = str(directory / "corpus.txt")
    try:
        realdata.write_peoples_daily_corpus(corpus, max_documents=120)
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))
    path = _create(str(directory / "zh.tfrecord"), corpus, VOCAB_ZH, do_whole_word_mask=True,
                   chinese_word_segmentation="jieba", no_nsp=True)
    return path, _parse(path, next_sentence=False)


def _masks(records, keys, masking=MASKING):
    n = len(keys)
    return mask_batch(records["input_ids"][:n], records["input_mask"][:n], records["word_ids"][:n],
                      records["mask_token_id"][:n], np.asarray(keys), masking)


def test_unmasked_records_hold_the_real_tokens_and_jieba_words(chinese_records):
    path, records = chinese_records
    assert record_layout([path]).unmasked and not record_layout([path]).next_sentence
    names = set(tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(path))).numpy()).features.feature)
    assert names == {"input_ids", "input_mask", "segment_ids", "word_ids", "mask_token_id"}
    ids, words = records["input_ids"], records["word_ids"]
    assert len(ids) > 500 and not (ids == MASK).any()
    assert (records["mask_token_id"] == MASK).all()
    inv = {i: t for t, i in ZH_TOKENS.items()}
    multi = whole = 0
    for row_ids, row_words, length in zip(ids, words, records["input_mask"].sum(1)):
        assert row_ids[0] == CLS and row_ids[length - 1] == SEP and row_words[0] == row_words[length - 1] == 0
        assert (row_words[length:] == 0).all() and (row_words[1:length - 1] > 0).all()
        numbers = row_words[1:length - 1]
        assert (np.diff(numbers) >= 0).all() and (np.diff(numbers) <= 1).all()  # words are contiguous runs
        for number in np.unique(numbers):
            text = "".join(inv[i] for i in row_ids[row_words == number])
            if (row_words == number).sum() > 1:
                multi += 1
                whole += jieba.lcut(text) == [text]  # a word jieba cut whole, not an arbitrary span
    assert multi > 2000 and whole / multi > 0.95


def test_mask_statistics_on_thousands_of_instances(chinese_records):
    """Every chosen word masked in full, 80/10/10 chosen per word within binomial bounds,
    no special token or padding masked, the original's count per sequence."""
    _, records = chinese_records
    n = len(records["input_ids"])
    outcomes, mixed, short, total = collections.Counter(), 0, 0, 0
    for epoch in range(4):  # the same records in four epochs: thousands of instances
        keys = np.arange(n) + epoch * n
        ids, positions, labels, weights = _masks(records, keys)
        for b in range(n):
            real = int(weights[b].sum())
            pos, lab = positions[b, :real], labels[b, :real]
            length = int(records["input_mask"][b].sum())
            words = records["word_ids"][b]
            original = records["input_ids"][b]
            assert (pos > 0).all() and (pos < length - 1).all() and (words[pos] > 0).all()
            assert (lab == original[pos]).all() and (np.diff(pos) > 0).all()
            assert not (positions[b, real:] | labels[b, real:]).any()
            unmasked = np.setdiff1d(np.arange(SEQ), pos)
            assert (ids[b, unmasked] == original[unmasked]).all()
            expected = min(PREDICTIONS, max(1, round(length * 0.15)))
            assert real <= expected
            short += real < expected
            total += 1
            for word in np.unique(words[pos]):
                members = np.flatnonzero(words == word)
                assert set(members) <= set(pos.tolist())  # the whole word
                now = ids[b, members]
                if (now == MASK).all():
                    outcomes["mask"] += 1
                elif (now == original[members]).all():
                    outcomes["keep"] += 1
                else:
                    outcomes["random"] += 1
                    mixed += len(members) > 1 and ((now == MASK).any() or (now == original[members]).any())
    chosen = sum(outcomes.values())
    assert chosen > 20000
    for outcome, p in (("mask", 0.8), ("random", 0.1), ("keep", 0.1)):
        bound = 4.5 * math.sqrt(chosen * p * (1 - p))
        assert abs(outcomes[outcome] - chosen * p) < bound, (outcome, outcomes)
    # Chosen per piece, 16% of two-piece words would mix [MASK] and kept pieces.
    assert mixed <= 2
    # A sequence ends short only when every word left would overshoot the count.
    assert short / total < 0.05


def test_per_wordpiece_records_mask_exactly_the_original_count(tmp_path):
    path = _create(str(tmp_path / "en.tfrecord"), INPUT, VOCAB_EN, max_predictions_per_seq=PREDICTIONS)
    records = _parse(path, next_sentence=True)
    lengths = records["input_mask"].sum(1)
    words = records["word_ids"]
    for row_words, length in zip(words, lengths):  # every WordPiece its own word
        assert list(row_words[1:length - 1][row_words[1:length - 1] > 0]) == list(range(1, (row_words > 0).sum() + 1))
    masking = DynamicMasking(0.15, PREDICTIONS, vocab_size=30522)
    _, _, _, weights = mask_batch(records["input_ids"], records["input_mask"], words, records["mask_token_id"],
                                  np.arange(len(lengths)), masking)
    expected = [min(PREDICTIONS, max(1, round(int(n) * 0.15))) for n in lengths]
    assert weights.sum(1).astype(int).tolist() == expected


def test_the_original_rounding_of_the_count():
    # Python's round, half to even, as the original's int(round(len(tokens) * masked_lm_prob)).
    assert [number_to_predict(n, 0.15, 20) for n in (3, 10, 30, 70, 200)] == [1, 2, 4, 10, 20]
    assert number_to_predict(50, 0.1, 20) == 5 and number_to_predict(25, 0.1, 20) == 2


def test_epochs_differ_and_the_same_seed_and_position_repeat(chinese_records):
    _, records = chinese_records
    n = 64
    first = _masks(records, np.arange(n))
    again = _masks(records, np.arange(n))
    second_epoch = _masks(records, np.arange(n) + 10_000)
    other_seed = _masks(records, np.arange(n), DynamicMasking(0.15, PREDICTIONS, len(ZH_TOKENS), seed=8))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert (first[1] != second_epoch[1]).any(axis=1).mean() > 0.9
    assert (first[1] != other_seed[1]).any(axis=1).mean() > 0.9


def test_training_stream_resumes_with_the_same_masks(chinese_records):
    """Batches from a resumed position are the uninterrupted stream's batches, masks included;
    a later pass over the files masks the same records differently."""
    path, records = chinese_records
    whole = list(make_dataset([path], 8, SEQ, PREDICTIONS, True, seed=5, masking=MASKING).take(6))
    resumed = list(make_dataset([path], 8, SEQ, PREDICTIONS, True, seed=5, start_batch=4, masking=MASKING).take(2))
    for a, b in zip(whole[4:], resumed):
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy(), err_msg=name)
    assert set(whole[0]) == {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                             "masked_lm_weights"}
    # Epoch 2: the same record (found by its unmasked tokens) gets other masks.
    n = len(records["input_ids"])
    per_epoch = (n // 8) * 8
    stream = make_dataset([path], 8, SEQ, PREDICTIONS, True, seed=5, masking=MASKING).unbatch()
    seen, differ, same = {}, 0, 0
    for example in stream.take(2 * per_epoch + 200):
        ids = example["input_ids"].numpy().copy()
        pos = example["masked_lm_positions"].numpy()[example["masked_lm_weights"].numpy() > 0]
        ids[pos] = example["masked_lm_ids"].numpy()[: len(pos)]
        key = ids.tobytes()
        if key in seen:
            differ += not np.array_equal(seen[key], pos)
            same += 1
        seen[key] = pos
    assert same > 100 and differ / same > 0.9


def test_held_out_masks_are_fixed_whatever_the_seed_and_step(chinese_records):
    path, _ = chinese_records
    one = list(make_dataset([path], 8, SEQ, PREDICTIONS, False, masking=MASKING).take(3))
    other = list(make_dataset([path], 8, SEQ, PREDICTIONS, False,
                              masking=DynamicMasking(0.15, PREDICTIONS, len(ZH_TOKENS), seed=99)).take(3))
    passes = list(one_pass_dataset([path], 8, SEQ, PREDICTIONS, MASKING).take(3))
    for a, b, c in zip(one, other, passes):
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy(), err_msg=name)
            np.testing.assert_array_equal(a[name].numpy(), c[name].numpy(), err_msg=name)
    assert MASKING.for_evaluation().seed == EVAL_SEED
