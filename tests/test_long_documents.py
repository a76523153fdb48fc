"""Training on whole documents (`--window_training=pooled`): the per-document feature cache, the
batches of documents (windows drawn, padded and trimmed), the pooling in the graph against the
prediction's pooling, and the document loss against a hand computation."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf
from test_classifier_data import VOCAB_EN

from bert_realformer.tasks.classification import task as classifier_task
from bert_realformer.tasks.classification import windows
from bert_realformer.tasks.classification.features import cached_features, document_dataset
from bert_realformer.tasks.classification.losses import ClassifierLoss
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
        pooled = windows.pool_windows(tf.constant(logits), tf.constant(mask), pooling).numpy()
        probabilities = tf.nn.softmax(pooled).numpy()
        np.testing.assert_allclose(probabilities, windows.combine_windows(flat, index, 3, False, pooling),
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
        loss, _ = classifier_task.document_loss_fn(ClassifierLoss(), pooling)(model, features, 0, {"examples": 2.0})
        expected = 0.0
        for document, label in ((0, 1), (1, 0)):
            pooled = pool(np.array(window_logits[document]), axis=0)
            expected += -(pooled[label] - math.log(np.exp(pooled).sum())) / 2
        assert float(loss) == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------- reading a document's windows
def _window_outputs():
    """Three documents; the windows in the order a length-sorted prediction meets them."""
    logits = np.array([[0.0, 3.0],    # document 0, window 2 (news that scores class 1 strongly)
                       [1.0, 0.0],    # document 0, window 0 (the head: class 0)
                       [0.5, 0.2],    # document 0, window 1
                       [0.0, 2.0],    # document 1, its one window
                       [2.0, 0.0],    # document 2, window 1
                       [0.0, 1.0]],   # document 2, window 0 (the head: class 1)
                      "float32")
    return windows.WindowOutputs(logits, np.array([0, 0, 0, 1, 2, 2]), np.array([2, 0, 1, 0, 1, 0]),
                                 labels=np.array([0, 1, 1]), regression=False)


def _softmax(row):
    return np.exp(row) / np.exp(row).sum()


def test_the_first_window_is_read_by_its_place_in_the_document_not_by_its_order():
    outputs = _window_outputs()
    np.testing.assert_allclose(outputs.combined("first"), [_softmax([1.0, 0.0]), _softmax([0.0, 2.0]),
                                                           _softmax([0.0, 1.0])], rtol=1e-6)
    np.testing.assert_allclose(outputs.combined("max")[0], _softmax([1.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(outputs.combined("mean")[2], _softmax([1.0, 0.5]), rtol=1e-6)


def _accuracy(labels):
    return lambda outputs: {"eval_accuracy": float(np.mean(outputs.argmax(1) == labels)), "global_step": 7}


def test_auto_reads_the_windows_every_way_and_keeps_the_best_on_the_dev_set():
    outputs = _window_outputs()
    # max: documents 0 and 2 wrong (1/3); mean: [0.5, 1.5] -> 1, wrong for 0, [1, .5] -> 0, wrong (1/3);
    # first: all three right.
    better = lambda value, than: than is None or value > than  # noqa: E731
    reading = windows.choose_pooling(outputs, "auto", _accuracy(outputs.labels), "eval_accuracy", better)
    assert reading.pooling == "first"
    assert reading.result == {"eval_accuracy": 1.0, "global_step": 7, "window_pooling": "first",
                              "eval_accuracy_by_max": pytest.approx(1 / 3),
                              "eval_accuracy_by_mean": pytest.approx(1 / 3), "eval_accuracy_by_first": 1.0}
    np.testing.assert_allclose(reading.outputs, outputs.combined("first"))
    # A tie keeps the earlier reading (max, the training pooling), and a pooling asked by name is
    # the only one read (no choice recorded).
    tied = windows.choose_pooling(outputs, "auto", lambda o: {"eval_accuracy": 0.5}, "eval_accuracy", better)
    assert tied.pooling == "max" and tied.result["window_pooling"] == "max"
    asked = windows.choose_pooling(outputs, "mean", _accuracy(outputs.labels), "eval_accuracy", better)
    assert asked.pooling == "mean" and asked.result == {"eval_accuracy": pytest.approx(1 / 3), "global_step": 7}
    # A metric minimised (a loss) picks the smallest.
    losses = {"max": 0.9, "mean": 0.4, "first": 0.6}
    lowest = windows.choose_pooling(
        outputs, "auto", lambda o: {"eval_loss": losses[next(p for p in windows.POOLINGS
                                                             if np.array_equal(o, outputs.combined(p)))]},
        "eval_loss", lambda value, than: than is None or value < than)
    assert lowest.pooling == "mean"


def test_prediction_without_a_dev_evaluation_reads_the_recorded_choice(tmp_path, caplog):
    from bert_realformer.finetuning import best_checkpoint
    from bert_realformer.training import recorded_options
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    prefix = best_checkpoint.checkpoint_prefix(str(run), 40)
    (run / "best" / "model.ckpt-40.index").write_bytes(b"")
    (run / "best" / "best.json").write_text(json.dumps(
        {"step": 40, "metric": "eval_accuracy", "value": 0.7, "metrics": {"window_pooling": "first"}}))
    assert windows.recorded_choice("auto", prefix, str(tmp_path / "elsewhere")) == "first"
    assert windows.recorded_choice("mean", prefix, str(run)) == "mean"  # asked by name: as asked
    # Other weights than the best: the run's recorded choice, else max (said).
    recorded_options.update(str(run), classifier_input={"doc_stride": 32, "window_pooling": "mean"})
    assert windows.recorded_choice("auto", str(run / "model.ckpt-60"), str(run)) == "mean"
    with caplog.at_level("WARNING"):
        assert windows.recorded_choice("auto", None, str(tmp_path / "elsewhere")) == "max"
    assert "no dev evaluation chose how to pool the windows" in caplog.text
