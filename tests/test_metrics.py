"""Metrics against values worked by hand."""

import math

import numpy as np
import pytest

from bert_realformer.tasks.classification import metrics


def test_three_class_report_by_hand():
    # true:  0 0 0 1 1 2 2 2 2 2
    # pred:  0 0 1 1 2 2 2 2 0 2
    labels = [0, 0, 0, 1, 1, 2, 2, 2, 2, 2]
    preds = [0, 0, 1, 1, 2, 2, 2, 2, 0, 2]
    result = metrics.classification_metrics(labels, preds, 3)
    np.testing.assert_array_equal(result["confusion_matrix"], [[2, 1, 0], [0, 1, 1], [1, 0, 4]])
    # class 0: P 2/3, R 2/3; class 1: P 1/2, R 1/2; class 2: P 4/5, R 4/5.
    per = result["per_class"]
    np.testing.assert_allclose(per["precision"], [2 / 3, 1 / 2, 4 / 5])
    np.testing.assert_allclose(per["recall"], [2 / 3, 1 / 2, 4 / 5])
    np.testing.assert_allclose(per["f1"], [2 / 3, 1 / 2, 4 / 5])
    assert result["accuracy"] == pytest.approx(0.7)
    assert result["macro_f1"] == pytest.approx((2 / 3 + 1 / 2 + 4 / 5) / 3)
    assert result["weighted_f1"] == pytest.approx((3 * 2 / 3 + 2 * 1 / 2 + 5 * 4 / 5) / 10)


def test_unpredicted_class_scores_zero_not_nan():
    result = metrics.classification_metrics([0, 1, 2], [0, 0, 0], 4)
    per = result["per_class"]
    np.testing.assert_allclose(per["precision"], [1 / 3, 0, 0, 0])
    np.testing.assert_allclose(per["recall"], [1, 0, 0, 0])
    assert per["support"].tolist() == [1, 1, 1, 0]
    assert result["macro_f1"] == pytest.approx(0.5 / 4)


def test_matthews_and_binary_f1_by_hand():
    labels = [1, 1, 1, 0, 0, 0, 0, 1]
    preds = [1, 1, 0, 0, 0, 1, 0, 1]
    # tp=3 tn=3 fp=1 fn=1: MCC = (9 - 1) / sqrt(4*4*4*4) = 0.5; F1 = 2*3 / (2*3 + 1 + 1) = 0.75
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(0.5)
    assert metrics.binary_f1(labels, preds) == pytest.approx(0.75)
    assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0  # undefined -> 0


def test_pearson_and_spearman_by_hand():
    x = [1, 2, 3, 4, 5]
    assert metrics.pearson(x, [2, 4, 6, 8, 10]) == pytest.approx(1.0)
    assert metrics.pearson(x, [5, 4, 3, 2, 1]) == pytest.approx(-1.0)
    # y = x^2 is monotone: Spearman 1, Pearson below 1.
    assert metrics.spearman(x, [1, 4, 9, 16, 25]) == pytest.approx(1.0)
    assert metrics.pearson(x, [1, 4, 9, 16, 25]) == pytest.approx(0.98110, abs=1e-5)
    # Ties: ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4].
    np.testing.assert_allclose(metrics._ranks([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
    assert metrics.spearman([1, 2, 2, 3], [2, 1, 3, 4]) == pytest.approx(
        metrics.pearson([1, 2.5, 2.5, 4], [2, 1, 3, 4]))
    assert not math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_mean_nll_by_hand():
    from bert_realformer.tasks.classification.metrics import mean_nll
    # -log 0.75 = 0.287682, -log 0.1 = 2.302585; a probability of 0 counts as 1e-30 (69.077553)
    assert mean_nll([[0.25, 0.75], [0.9, 0.1]], [1, 1]) == pytest.approx((0.287682 + 2.302585) / 2, abs=1e-6)
    assert mean_nll([[1.0, 0.0]], [1]) == pytest.approx(69.077553, abs=1e-6)
