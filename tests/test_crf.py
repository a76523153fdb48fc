"""The linear-chain CRF against brute-force enumeration of every tag path."""

import itertools

import numpy as np
import pytest

from modeling import crf


def _brute_force(emissions, length, transitions):
    """(log partition, best path, {path: score}) by enumerating all C^length paths."""
    num_tags = emissions.shape[-1]
    scores = {}
    for path in itertools.product(range(num_tags), repeat=length):
        score = sum(emissions[t, path[t]] for t in range(length))
        score += sum(transitions[path[t - 1], path[t]] for t in range(1, length))
        scores[path] = score
    values = np.array(list(scores.values()))
    log_z = np.log(np.sum(np.exp(values - values.max()))) + values.max()
    return log_z, max(scores, key=scores.get), scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_likelihood_partition_and_viterbi_match_enumeration(seed):
    rng = np.random.RandomState(seed)
    batch, steps, tags = 4, 5, 3
    emissions = rng.normal(size=(batch, steps, tags)).astype("float32") * 2
    transitions = rng.normal(size=(tags, tags)).astype("float32")
    lengths = [5, 3, 1, 4]
    mask = (np.arange(steps)[None, :] < np.array(lengths)[:, None]).astype("float32")
    gold = rng.randint(0, tags, size=(batch, steps))
    log_z = np.asarray(crf.log_partition(emissions, mask, transitions))
    likelihood = np.asarray(crf.log_likelihood(emissions, gold, mask, transitions))
    decoded = np.asarray(crf.viterbi_decode(emissions, mask, transitions))
    for b, length in enumerate(lengths):
        expected_z, best, scores = _brute_force(emissions[b], length, transitions)
        np.testing.assert_allclose(log_z[b], expected_z, rtol=1e-5)
        gold_path = tuple(int(t) for t in gold[b, :length])
        np.testing.assert_allclose(likelihood[b], scores[gold_path] - expected_z, rtol=1e-5, atol=1e-5)
        assert tuple(decoded[b, :length]) == best
        assert all(decoded[b, t] == decoded[b, length - 1] for t in range(length, steps))


def test_probabilities_of_all_paths_sum_to_one():
    rng = np.random.RandomState(7)
    emissions = rng.normal(size=(1, 3, 2)).astype("float32")
    transitions = rng.normal(size=(2, 2)).astype("float32")
    mask = np.ones((1, 3), "float32")
    total = 0.0
    for path in itertools.product(range(2), repeat=3):
        total += float(np.exp(crf.log_likelihood(emissions, np.array([path]), mask, transitions))[0])
    assert abs(total - 1.0) < 1e-5
