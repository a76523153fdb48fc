"""Training on whole documents (`--window_training=pooled`): the per-document feature cache, the
batches of documents (windows drawn, padded and trimmed), the pooling in the graph against the
prediction's pooling, and the document loss against a hand computation."""

import math

import numpy as np
import pytest
import tensorflow as tf
from test_classifier_data import VOCAB_EN

from bert_realformer.tasks.classification import task as classifier_task
from bert_realformer.tasks.classification.features import cached_features, document_dataset
from bert_realformer.tasks.classification.reading import InputExample
from bert_realformer.tasks.feature_cache import record_count
from tokenization import FullTokenizer

WORDS = "the of and to in a is that for it as was with be by on not he".split()


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """Six documents of 1 to 11 windows (max_seq_length 8, stride 3), labels 0 1 0 1 0 1."""
    tokenizer = FullTokenizer(VOCAB_EN)
    rng = np.random.RandomState(0)
    examples = [InputExample(f"d{i}", " ".join(rng.choice(WORDS, n)), None, str(i % 2))
                for i, n in enumerate((4, 9, 15, 20, 30, 36))]
    path = str(tmp_path_factory.mktemp("docs") / "train.tf_record")
    cached_features(examples, ["0", "1"], 8, tokenizer, path, doc_stride=3, per_document=True)
    windows = str(tmp_path_factory.mktemp("windows") / "train.tf_record")
    cached_features(examples, ["0", "1"], 8, tokenizer, windows, doc_stride=3)
    return examples, path, windows


def _windows_by_document(windows_path):
    """{document: [input_ids of each window]} from the per-window cache."""
    spec = {"input_ids": tf.io.FixedLenFeature([8], tf.int64), "example_index": tf.io.FixedLenFeature([], tf.int64)}
    found = {}
    for record in tf.data.TFRecordDataset(windows_path):
        parsed = tf.io.parse_single_example(record, spec)
        found.setdefault(int(parsed["example_index"]), []).append(parsed["input_ids"].numpy().tolist())
    return found


def test_document_batches_hold_each_documents_own_windows(documents):
    examples, path, windows_path = documents
    assert record_count(path) == len(examples)
    by_document = _windows_by_document(windows_path)
    counts = {i: len(w) for i, w in by_document.items()}
    assert counts[0] == 1 and counts[5] > 6  # one window, and more than max_windows
    batches = list(document_dataset(path, 2, 8, max_windows=6, seed=3, num_documents=6).take(6))
    for batch in batches:
        ids, mask, labels = batch["input_ids"].numpy(), batch["window_mask"].numpy(), batch["label_ids"].numpy()
        assert ids.shape[0] == 2 and ids.shape[2] == 8 and ids.shape[1] == mask.sum(1).max() <= 6
        for row in range(2):
            real = [w for w, m in zip(ids[row].tolist(), mask[row]) if m]
            (document,) = [i for i, w in by_document.items() if real[0] in w and all(x in w for x in real)]
            assert labels[row] == document % 2
            expected = by_document[document]
            assert len(real) == min(len(expected), 6)
            assert real == sorted(real, key=expected.index)  # in text order
            assert not ids[row][~mask[row].astype(bool)].any()  # padding windows are zeros


def test_a_long_document_draws_its_windows_by_position_so_a_resume_draws_the_same(documents):
    _, path, _ = documents
    data = lambda start: document_dataset(path, 2, 8, max_windows=3, seed=3, start_batch=start,  # noqa: E731
                                          num_documents=6)
    whole = [b["input_ids"].numpy() for b in data(0).take(9)]
    resumed = [b["input_ids"].numpy() for b in data(4).take(5)]
    for a, b in zip(whole[4:], resumed):
        np.testing.assert_array_equal(a, b)
    # The same document draws other windows in another epoch (positions differ).
    longest = {}
    for batch in data(0).take(30):
        for row, label in zip(batch["input_ids"].numpy(), batch["label_ids"].numpy()):
            if label == 1:
                longest.setdefault(len(row), set()).add(row.tobytes())
    assert max(len(drawn) for drawn in longest.values()) > 1


def test_pooling_in_the_graph_is_the_predictions_pooling():
    rng = np.random.RandomState(1)
    logits = rng.normal(size=(3, 4, 5)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], "int32")
    flat = logits[mask.astype(bool)]
    index = np.repeat(np.arange(3), mask.sum(1))
    for pooling in ("mean", "max"):
        pooled = classifier_task.pool_windows(tf.constant(logits), tf.constant(mask), pooling).numpy()
        probabilities = tf.nn.softmax(pooled).numpy()
        np.testing.assert_allclose(probabilities, classifier_task.combine_windows(flat, index, 3, False, pooling),
                                   rtol=1e-5)


class _Linear:
    """A stand-in model: logits = the mean of the input ids of each sequence times a weight row."""

    def __init__(self, weights):
        self.weights = tf.constant(weights, tf.float32)

    def __call__(self, features, training=False):
        ids = tf.cast(features["input_ids"], tf.float32)
        return tf.reduce_mean(ids, axis=1, keepdims=True) * self.weights[None, :]


def test_the_document_loss_by_hand():
    """Two documents (3 and 1 windows), max and mean pooling of the logits, cross-entropy of the
    softmax; the loss share is the mean over the documents."""
    ids = np.zeros((2, 3, 4), "int32")
    ids[0, 0], ids[0, 1], ids[0, 2], ids[1, 0] = [1, 1, 1, 1], [4, 4, 4, 4], [2, 2, 2, 2], [3, 3, 3, 3]
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
                "window_mask": np.array([[1, 1, 1], [1, 0, 0]], "int32"), "label_ids": np.array([1, 0], "int32")}
    model = _Linear([0.5, -0.25])
    window_logits = {0: [[0.5, -0.25], [2.0, -1.0], [1.0, -0.5]], 1: [[1.5, -0.75]]}
    for pooling, pool in (("max", np.max), ("mean", np.mean)):
        loss, _ = classifier_task.document_loss_fn(False, pooling)(model, features, 0, {"examples": 2.0})
        expected = 0.0
        for document, label in ((0, 1), (1, 0)):
            pooled = pool(np.array(window_logits[document]), axis=0)
            expected += -(pooled[label] - math.log(np.exp(pooled).sum())) / 2
        assert float(loss) == pytest.approx(expected, rel=1e-6)
