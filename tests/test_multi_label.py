"""Multi-label classification's parts: reading lists of labels from generic files (and the
mistakes named by file and line), the multi-hot records, the loss against Keras's binary
cross-entropy and R-Drop's Bernoulli divergence by hand, the metrics and tuned thresholds
against hand counts and a brute-force search, and the real set built from People's Daily."""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.features import _label_value, feature_spec
from bert_realformer.tasks.multi_label.losses import MultiLabelLoss
from bert_realformer.tasks.multi_label.metrics import multi_label_results, sigmoid, tuned_thresholds
from bert_realformer.tasks.multi_label.reading import MultiLabelProcessor


def _processor(tmp_path, files, **options):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    processor = MultiLabelProcessor(**options)
    processor.set_labels_from(str(tmp_path))
    return processor


def test_labels_are_read_as_lists_in_tsv_and_json_lines(tmp_path):
    tsv = "text\tlabel\nfirst\tsports, politics\nsecond\t\nthird\tpolitics,politics\n"
    processor = _processor(tmp_path, {"train.tsv": tsv, "dev.tsv": tsv, "test.tsv": "text\tlabel\nx\tnew,sports\n"})
    assert processor.get_labels() == ["politics", "sports"]
    assert [e.label for e in processor.get_train_examples(str(tmp_path))] == [("sports", "politics"), (),
                                                                            ("politics",)]
    assert processor.get_test_examples(str(tmp_path))[0].label == ("sports",)  # (unknown test labels: not used)
    jsonl = "".join(json.dumps(row) + "\n" for row in [{"text": "a", "label": ["x", "y"]}, {"text": "b", "label": []},
                                                       {"text": "c", "label": "y;z"}])
    processor = _processor(tmp_path, {"train.jsonl": jsonl}, data_format="jsonl", label_separator=";")
    assert processor.get_labels() == ["x", "y", "z"]
    assert [e.label for e in processor.get_train_examples(str(tmp_path))] == [("x", "y"), (), ("y", "z")]


def test_mistakes_are_named_by_file_and_line(tmp_path):
    processor = _processor(tmp_path, {"train.tsv": "text\tlabel\na\tx\n", "dev.tsv": "text\tlabel\nb\tx\nc\tx,w\n"})
    with pytest.raises(InputError, match=r"dev.tsv:3: unknown label 'w'; expected labels of x"):
        processor.get_dev_examples(str(tmp_path))
    with pytest.raises(InputError, match=r"train.tsv: no example has a label; a multi-label task needs each "
                                         r"example's labels separated by ','"):
        _processor(tmp_path, {"train.tsv": "text\tlabel\na\t\n"})
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 3}\n')
    with pytest.raises(InputError, match=r"train.jsonl:1: expected a list of labels"):
        MultiLabelProcessor(data_format="jsonl").set_labels_from(str(tmp_path))
    (tmp_path / "labels.txt").write_text("sports\ngood,ok\n")  # (a class no row can name)
    with pytest.raises(InputError, match=r"labels.txt:2: label 'good,ok' holds the label separator ',', so no "
                                         r"example can name it"):
        MultiLabelProcessor(label_file=str(tmp_path / "labels.txt")).set_labels_from(str(tmp_path))


def test_a_multi_label_record_is_multi_hot():
    label_map = {"a": 0, "b": 1, "c": 2}
    assert _label_value(("c", "a"), label_map) == [1, 0, 1] and _label_value((), label_map) == [0, 0, 0]
    assert _label_value("b", label_map) == 1 and _label_value("2.5", None) == 2.5
    assert feature_spec(8, multi_hot=3)["label_ids"].shape == [3]


LOGITS = np.array([[2.0, -1.0, 0.0], [-3.0, 0.5, 4.0]], np.float32)
TARGETS = np.array([[1, 0, 1], [0, 0, 1]])


def test_the_loss_is_the_mean_binary_cross_entropy_as_keras_computes_it():
    loss = MultiLabelLoss()
    p = 1 / (1 + np.exp(-LOGITS.astype(np.float64)))
    by_hand = -(TARGETS * np.log(p) + (1 - TARGETS) * np.log(1 - p)).mean(axis=1)
    np.testing.assert_allclose(loss.per_example(tf.constant(LOGITS), tf.constant(TARGETS)).numpy(), by_hand, rtol=1e-5)
    keras_mean = keras.losses.BinaryCrossentropy(from_logits=True)(TARGETS.astype("float32"), LOGITS)
    np.testing.assert_allclose(float(loss.weighted_sum(tf.constant(LOGITS), tf.constant(TARGETS))) / 2,
                               float(keras_mean), rtol=1e-5)
    assert loss.totals({"label_ids": tf.constant(TARGETS)})["examples"] == 2.0


def test_rdrop_adds_each_labels_bernoulli_divergence():
    again = np.array([[1.0, 0.0, 0.5], [-2.0, -0.5, 3.0]], np.float32)
    p, q = (1 / (1 + np.exp(-x.astype(np.float64))) for x in (LOGITS, again))

    def kl(a, b):
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    loss = MultiLabelLoss(rdrop_alpha=2.0)
    plain = loss.per_example(tf.constant(LOGITS), tf.constant(TARGETS)).numpy() + \
        loss.per_example(tf.constant(again), tf.constant(TARGETS)).numpy()
    expected = (0.5 * plain + 0.25 * 2.0 * (kl(p, q) + kl(q, p)).mean(axis=1)).sum()
    got = loss.rdrop_weighted_sum(tf.constant(LOGITS), tf.constant(again), tf.constant(TARGETS))
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


def test_metrics_by_hand():
    # probabilities 0.88 0.27 0.5 / 0.05 0.62 0.98; at 0.5: predicted [1 0 1] [0 1 1]
    result = multi_label_results(LOGITS, TARGETS, ["a", "b", "c"], [0.5, 0.5, 0.5], 7)
    # TP a1 b0 c2, FP a0 b1 c0, FN 0 0 0: micro P 3/4 R 1 F1 6/7; F1 a 1, b 0, c 1
    assert result["eval_micro_precision"] == 0.75 and result["eval_micro_recall"] == 1.0
    assert result["eval_micro_f1"] == pytest.approx(6 / 7) and result["eval_macro_f1"] == pytest.approx(2 / 3)
    assert result["eval_subset_accuracy"] == 0.5 and result["global_step"] == 7
    assert (result["class_b_precision"], result["class_b_f1"], result["class_c_support"]) == (0.0, 0.0, 2)
    p = sigmoid(LOGITS)
    bce = -(TARGETS * np.log(p) + (1 - TARGETS) * np.log(1 - p)).mean()
    assert result["eval_loss"] == pytest.approx(bce)
    assert json.loads(result["thresholds"]) == {"a": 0.5, "b": 0.5, "c": 0.5}
    stricter = multi_label_results(LOGITS, TARGETS, ["a", "b", "c"], [0.5, 0.7, 0.99], 7)
    # predicted [1 0 0] [0 0 0]: no row right, c never found, b no longer wrong
    assert stricter["eval_subset_accuracy"] == 0.0 and stricter["class_c_recall"] == 0.0
    assert stricter["eval_micro_precision"] == 1.0 and stricter["eval_micro_recall"] == pytest.approx(1 / 3)


def test_tuned_thresholds_are_the_best_f1_per_label_nearest_one_half():
    rng = np.random.RandomState(0)
    labels = (rng.rand(200, 4) < [0.1, 0.3, 0.5, 0.0]).astype(int)
    logits = rng.normal(size=(200, 4)) + 1.5 * labels
    grid = [round(0.05 * i, 2) for i in range(1, 20)]
    chosen = tuned_thresholds(logits, labels)
    p = sigmoid(logits)
    for c in range(3):
        def f1(t, c=c):
            predicted = p[:, c] >= t
            tp = (predicted & (labels[:, c] == 1)).sum()
            return 0.0 if tp == 0 else 2 * tp / (predicted.sum() + labels[:, c].sum())
        best = max(f1(t) for t in grid)
        assert math.isclose(f1(chosen[c]), best)
        assert min(abs(t - 0.5) for t in grid if math.isclose(f1(t), best)) == pytest.approx(abs(chosen[c] - 0.5))
    assert chosen[3] == 0.5  # (no dev example has it)
