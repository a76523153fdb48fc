"""Attention statistics on cases with known answers."""

import math

import numpy as np
import pytest

from bert_realformer.comparison.attention_analysis import AttentionStatistics, entropy, jensen_shannon


def test_uniform_attention_over_n_tokens_has_entropy_log_n():
    for n in (1, 2, 7, 128):
        assert entropy(np.full(n, 1.0 / n)) == pytest.approx(math.log(n))
    assert entropy(np.array([1.0, 0.0, 0.0])) == 0.0


def test_jensen_shannon_known_values():
    p = np.array([0.2, 0.3, 0.5])
    assert jensen_shannon(p, p) == pytest.approx(0.0, abs=1e-12)
    assert jensen_shannon(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(math.log(2))
    # By hand: P=[1,0], Q=[1/2,1/2]: M=[3/4,1/4]; KL(P||M)=log(4/3); KL(Q||M)=1/2 log(2/3)+1/2 log 2.
    expected = 0.5 * math.log(4 / 3) + 0.5 * (0.5 * math.log(2 / 3) + 0.5 * math.log(2))
    assert jensen_shannon(np.array([1.0, 0.0]), np.array([0.5, 0.5])) == pytest.approx(expected)


def test_statistics_exclude_padding_and_compare_adjacent_layers():
    # 2 layers, 1 head, batch 1, 4 positions of which 3 are real; uniform over the 3 real keys.
    probs = np.zeros((1, 1, 4, 4))
    probs[..., :3] = 1.0 / 3
    stats = AttentionStatistics(num_layers=2, num_heads=1)
    stats.add([probs, probs.copy()], np.array([[1, 1, 1, 0]]))
    summary = stats.summary()
    entropy_stats = summary["entropy"][0][0]
    assert entropy_stats["count"] == 3  # the padded query is left out
    assert entropy_stats["quantiles"]["0.5"] == pytest.approx(math.log(3))
    assert summary["jsd_adjacent"][0][0]["quantiles"]["1.0"] == pytest.approx(0.0, abs=1e-12)
