"""Fine-tuning on real data's shapes: the training order (a permutation of the whole set every
epoch, the original's 100-example buffer one flag away), long documents as windows combined per
document, and batches padded to their longest sequence with the outputs of full padding."""

import math
import os

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer.finetuning.schedule import Schedule, training_batches
from bert_realformer.inference import padding
from bert_realformer.tasks import multiple_choice
from bert_realformer.tasks.classification import task as classifier_task
from bert_realformer.tasks.classification import windows
from bert_realformer.tasks.classification.features import RecordLayout, cached_features, prediction_dataset
from bert_realformer.tasks.classification.reading import InputExample
from bert_realformer.tasks.feature_cache import record_count
from bert_realformer.tasks.multiple_choice import ChoiceExample
from bert_realformer.tasks.multiple_choice import task as choice_task
from bert_realformer.tasks.ner import task as ner_task
from bert_realformer.tasks.ner.reading import Sentence
from bert_realformer.tasks.sequences import pack, pack_windows, window_starts
from bert_realformer.tasks.squad import task as squad_task
from bert_realformer.training.driver import Driver, RunOptions
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_EN = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_en_uncased.txt")
TOKENIZER = FullTokenizer(VOCAB_EN)
# windows of 64 with a stride of 32 and questions of at most 24 tokens; the original's answer settings
SQUAD_OPTIONS = squad_task.SquadOptions(doc_stride=32, max_query_length=24, n_best_size=20, max_answer_length=30)
CONFIG = modeling.BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=64, type_vocab_size=2,
                             residual_attention="sum")
WORDS = "the cat sat on a mat while an old dog slept near the warm fire and rain fell outside".split()


def _text(rng, n):
    return " ".join(rng.choice(WORDS, size=n))


# ---------------------------------------------------------------------- the training order
def _labels_in_order(dataset, n):
    return [int(x) for batch in dataset.take(n) for x in batch["label"].numpy()]


def test_every_epoch_is_a_new_permutation_of_a_sorted_file():
    labels = np.array([0] * 200 + [1] * 200)  # sorted by label, as THUCNews ships
    data = tf.data.Dataset.from_tensor_slices({"label": labels, "index": np.arange(400)})
    batches = training_batches(data, 8, seed=3, num_examples=400)
    seen = [int(x) for batch in batches.take(100) for x in batch["index"].numpy()]
    first, second = seen[:400], seen[400:800]
    assert sorted(first) == sorted(second) == list(range(400))  # each epoch: every example once
    assert first != second
    # The first 50 examples mix the classes as the file does: within 4.5 sigma of 25 positives.
    assert abs(sum(labels[first[:50]]) - 25) < 4.5 * math.sqrt(50 * 0.25)
    # The original's buffer of 100 on the same file: the first 100 examples are all negatives.
    original = training_batches(data, 8, seed=3, shuffle_buffer_size=100)
    assert set(_labels_in_order(original, 12)) == {0}
    # Resume: batches from `start_batch` on are the uninterrupted stream's.
    resumed = training_batches(data, 8, seed=3, start_batch=57, num_examples=400)
    assert [int(x) for batch in resumed.take(10) for x in batch["index"].numpy()] == seen[57 * 8:67 * 8]
    again = training_batches(data, 8, seed=3, num_examples=400)
    assert [int(x) for batch in again.take(100) for x in batch["index"].numpy()] == seen


def test_group_by_length_makes_batches_of_similar_lengths_cut_to_the_longest():
    rng = np.random.default_rng(0)
    n, seq = 800, 64
    lengths = rng.integers(3, seq + 1, size=n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    data = tf.data.Dataset.from_tensor_slices({"input_ids": mask * 7, "input_mask": mask,
                                               "index": np.arange(n)})
    grouped = list(training_batches(data, 8, seed=1, num_examples=n, group_by_length=True).take(100))
    seen = [int(i) for b in grouped for i in b["index"].numpy()]
    assert sorted(seen) == list(range(n))  # one epoch of groups of 50 batches: every example once
    widths, spreads = [], []
    for batch in grouped:
        batch_lengths = batch["input_mask"].numpy().sum(1)
        width = batch["input_ids"].shape[1]
        assert width % 8 == 0 or width == seq
        assert width == min(seq, -(-batch_lengths.max() // 8) * 8)
        widths.append(width)
        spreads.append(np.ptp(batch_lengths))
    assert np.mean(widths) < 0.75 * seq and np.mean(spreads) < 8
    resumed = training_batches(data, 8, seed=1, start_batch=60, num_examples=n, group_by_length=True)
    assert [int(i) for b in resumed.take(10) for i in b["index"].numpy()] == seen[60 * 8:70 * 8]


def test_a_resumed_classifier_run_continues_the_same_permutation(tmp_path):
    """A run stopped after its step-3 training state and restarted ends with the weights of
    the uninterrupted run."""
    rng = np.random.default_rng(0)
    examples = [InputExample(f"t-{i}", _text(rng, 6), None, str(i // 20)) for i in range(40)]  # sorted
    path = str(tmp_path / "train.tf_record")
    cached_features(examples, ["0", "1"], 16, TOKENIZER, path)

    def train(directory):
        options = RunOptions(seed_globally=True,
                             output_dir=str(directory), save_checkpoints_steps=3, iterations_per_loop=1,
                             keep_checkpoint_max=10)
        driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(CONFIG, 2),
                        options, stream=open(os.devnull, "w"))
        driver.train(classifier_task.training_task(  # 6 steps: 1.2 epochs of 40 examples in batches of 8
            examples, TOKENIZER, 16, Schedule(8, 1e-2, num_train_epochs=1.2, warmup_proportion=0.0),
            label_list=["0", "1"], features_path=path))
        return driver.model

    whole = train(tmp_path / "whole")
    interrupted = tmp_path / "interrupted"
    train(interrupted)
    state = interrupted / "training_state"
    for name in os.listdir(state):  # as if killed after the step-3 save
        if name.startswith("ckpt-6"):
            os.remove(state / name)
    (state / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-3"\n')
    for name in os.listdir(interrupted):
        if name.startswith("model.ckpt-6"):
            os.remove(interrupted / name)
    resumed = train(interrupted)
    for a, b in zip(whole.trainable_weights, resumed.trainable_weights):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-6, err_msg=a.path)


# ---------------------------------------------------------------------- long documents
def test_windows_as_run_squad_cuts_documents():
    assert window_starts(10, 4, 2) == [0, 2, 4, 6]
    assert window_starts(3, 4, 2) == [0]
    assert window_starts(9, 4, 3) == [0, 3, 6]
    a = list(range(1, 11))
    windows = pack_windows(a, None, 6, 2, "C", "S")
    assert [w[0] for w in windows] == [["C", 1, 2, 3, 4, "S"], ["C", 3, 4, 5, 6, "S"], ["C", 5, 6, 7, 8, "S"],
                                       ["C", 7, 8, 9, 10, "S"]]
    # A pair: B kept in every window (cut to half the room), A windowed in what is left.
    pair = pack_windows(a, [21, 22, 23, 24, 25], 9, 2, "C", "S")
    assert [w[0] for w in pair][:2] == [["C", 1, 2, 3, "S", 21, 22, 23, "S"], ["C", 3, 4, 5, "S", 21, 22, 23, "S"]]
    assert pair[0][1] == [0] * 5 + [1] * 4
    # What fits is exactly the original's one sequence.
    assert pack_windows([1, 2], [3], 9, 2, "C", "S") == [pack([1, 2], [3], 9, "C", "S")]
    assert pack_windows([1, 2, 3], None, 5, 1, "C", "S") == [pack([1, 2, 3], None, 5, "C", "S")]
    # Two separators between the texts leave A one token less in each window.
    roberta = pack_windows(a, [21, 22, 23, 24, 25], 10, 2, "C", "S", between=["S", "S"])
    assert [w[0] for w in roberta][:2] == [["C", 1, 2, 3, "S", "S", 21, 22, 23, "S"],
                                           ["C", 3, 4, 5, "S", "S", 21, 22, 23, "S"]]


def test_windows_combine_into_one_row_per_document():
    """Logits pooled, then a softmax: the mean equals the renormalised mean of the windows'
    log-probabilities; the max takes each class's strongest window, and a window with low logits
    for every class (abstaining) changes nothing."""
    logits = np.array([[2.0, 0.0], [-1.0, 1.0], [0.5, 0.1], [-3.0, -3.5], [-1.0, 1.0], [-9.0, -9.0]], "float32")
    index = np.array([0, 0, 1, 2, 3, 3])
    mean = windows.combine_windows(logits, index, 4, regression=False)
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    by_hand = np.exp((log_probs[0] + log_probs[1]) / 2)
    np.testing.assert_allclose(mean[0], by_hand / by_hand.sum(), rtol=1e-6)
    softmax = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(mean[1:3], softmax[2:4], rtol=1e-6)  # one window: its probabilities
    maximum = windows.combine_windows(logits, index, 4, regression=False, pooling="max")
    np.testing.assert_allclose(maximum[0], np.exp([2.0, 1.0]) / np.exp([2.0, 1.0]).sum(), rtol=1e-6)
    np.testing.assert_allclose(maximum[3], softmax[4], rtol=1e-6)  # the abstaining window is ignored
    scores = windows.combine_windows(np.array([[1.0], [3.0], [5.0]], "float32"), np.array([0, 0, 1]), 2,
                                             regression=True)
    np.testing.assert_allclose(scores[:, 0], [2.0, 5.0])


# ---------------------------------------------------------------------- dynamic padding
@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    keras_seed = 5
    options = RunOptions(seed_globally=True, output_dir=str(tmp_path_factory.mktemp("run")), seed=keras_seed)
    return lambda make: Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: make(CONFIG), options,
                               stream=open(os.devnull, "w"))


def _examples(n=37, seed=0):
    rng = np.random.default_rng(seed)
    return [InputExample(f"e-{i}", _text(rng, int(rng.integers(2, 40))), None, str(i % 3)) for i in range(n)]


def _traced_once(run, predict):
    """`predict()` twice: the second call re-uses the first one's trace (no new closure per call)."""
    first = predict()
    traces = run.prediction_traces
    np.testing.assert_equal(predict(), first)
    assert run.prediction_traces == traces
    return first


def test_classifier_outputs_with_dynamic_padding_equal_full_padding_and_trace_few_shapes(driver, tmp_path):
    run = driver(lambda config: modeling.BertClassifier(config, 3))
    examples = _examples()
    path = str(tmp_path / "eval.tf_record")
    fixed, labels = classifier_task.predict(run, examples, ["0", "1", "2"], TOKENIZER, path, 2, 64,
                                            dynamic_padding=False)
    dynamic, dynamic_labels = _traced_once(
        run, lambda: classifier_task.predict(run, examples, ["0", "1", "2"], TOKENIZER, path, 2, 64))
    np.testing.assert_allclose(dynamic, fixed, atol=1e-5)
    np.testing.assert_array_equal(labels, dynamic_labels)
    from bert_realformer.tasks.classification.features import features_key
    from bert_realformer.tasks.feature_cache import keyed_path
    cached = keyed_path(path, features_key(examples, ["0", "1", "2"], 64, TOKENIZER, sort_by_length=True))
    batches = prediction_dataset(cached, RecordLayout(64), 2)  # the dynamic run's
    widths = {int(b["input_ids"].shape[1]) for b in batches}
    assert len(widths) >= 4 and all(w % 8 == 0 for w in widths)
    traces = []

    def outputs(model, features):
        traces.append(features["input_ids"].shape)
        return {"logits": model(features, training=False)}

    run.predict(prediction_dataset(cached, RecordLayout(64), 2), outputs)
    assert len(traces) <= 3  # not one per length


def test_long_documents_in_windows_give_one_row_each(driver, tmp_path):
    run = driver(lambda config: modeling.BertClassifier(config, 3))
    rng = np.random.default_rng(1)
    examples = [InputExample("long", _text(rng, 120), None, "1"), InputExample("short", _text(rng, 5), None, "2")]
    path = str(tmp_path / "docs.tf_record")
    probabilities, labels = classifier_task.predict(run, examples, ["0", "1", "2"], TOKENIZER, path, 4, 32,
                                                    doc_stride=16)
    assert probabilities.shape == (2, 3) and labels.tolist() == [1, 2]
    (cached,) = tmp_path.glob("docs-*.tf_record")  # (named by its key)
    windows = record_count(str(cached))
    assert windows == 1 + len(window_starts(len(TOKENIZER.tokenize(examples[0].text_a)), 30, 16))
    # By hand: every window's probabilities, combined.
    window_rows, _ = classifier_task.predict(
        run, [InputExample(f"w{i}", " ".join(TOKENIZER.convert_ids_to_tokens(ids[1:-1])).replace(" ##", ""), None,
                           "1") for i, (ids, _) in enumerate(pack_windows(
                               TOKENIZER.tokenize_to_ids(examples[0].text_a), None, 32, 16, 101, 102))],
        ["0", "1", "2"], TOKENIZER, str(tmp_path / "w.tf_record"), 4, 32)
    by_hand = np.exp(np.log(window_rows).mean(0))
    np.testing.assert_allclose(probabilities[0], by_hand / by_hand.sum(), rtol=1e-5)
    # The short document: exactly today's (truncating) result.
    today, _ = classifier_task.predict(run, examples[1:], ["0", "1", "2"], TOKENIZER, str(tmp_path / "t.tf_record"),
                                       4, 32)
    np.testing.assert_array_equal(probabilities[1], today[0])


def test_ner_squad_and_choices_with_dynamic_padding_equal_full_padding_and_trace_once(driver, data_dir):
    rng = np.random.default_rng(2)
    sentences = []
    for _ in range(21):
        tokens = [str(w) for w in rng.choice(WORDS, size=int(rng.integers(2, 20)))]
        sentences.append(Sentence(tokens, None, list(range(1, len(tokens) + 1)), "f"))
    labels = ["O", "B-X", "I-X"]
    for crf in (False, True):
        ner = driver(lambda config, crf=crf: modeling.BertTokenClassifier(config, 3, crf=crf))
        fixed = ner_task.predict_tags(ner, sentences, TOKENIZER, labels, 64, 4, crf, dynamic_padding=False)
        tags = _traced_once(ner, lambda ner=ner, crf=crf: ner_task.predict_tags(ner, sentences, TOKENIZER, labels, 64,
                                                                                4, crf))
        assert tags == fixed

    choices = driver(lambda config: modeling.BertMultipleChoice(config))
    examples = [multiple_choice.ChoiceExample(_text(rng, int(rng.integers(3, 25))), "", [_text(rng, 3), _text(rng, 5)],
                                              0, f"f:{i}") for i in range(9)]
    fixed = choice_task.predict_probabilities(choices, examples, TOKENIZER, 64, 4, dynamic_padding=False)
    np.testing.assert_allclose(
        _traced_once(choices, lambda: choice_task.predict_probabilities(choices, examples, TOKENIZER, 64, 4)), fixed,
        atol=1e-5)

    from conftest import allennlp_fixture

    from bert_realformer.tasks.squad.reading import read_squad_examples
    squad, _ = read_squad_examples(allennlp_fixture("squad.json"), is_training=False)
    spans = driver(lambda config: modeling.BertSpanLabeler(config))
    args = (spans, squad, TOKENIZER, SQUAD_OPTIONS, 64, 4)
    fixed = squad_task.predict(*args, dynamic_padding=False)
    assert _traced_once(spans, lambda: squad_task.predict(*args)) == fixed


@pytest.fixture(scope="module")
def compiled_driver(tmp_path_factory):
    """`driver`'s models (the same seed: the same weights), predicting through XLA."""
    options = RunOptions(seed_globally=True, output_dir=str(tmp_path_factory.mktemp("xla")), seed=5,
                         prediction_engine="xla")
    return lambda make: Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: make(CONFIG), options,
                               stream=open(os.devnull, "w"))


def test_xla_compiled_prediction_gives_the_graphs_outputs_for_every_task(driver, compiled_driver, tmp_path):
    """Compiled on one device: the classifier's probabilities (37 examples in batches of 4, the
    last one filled up with empty rows), the tags with and without CRF, the choices'
    probabilities and SQuAD's answers equal the graph's (1e-5), each traced once; the batches
    are cut to the length buckets."""
    def both(build, predict):
        """`predict(run, name)` by the graph driver's model and the compiled one's (the same weights)."""
        runs = [make(build) for make in (driver, compiled_driver)]
        assert [run.predictor.engine.name for run in runs] == ["graph", "xla"]
        return [_traced_once(run, lambda run=run, name=name: predict(run, name)) for run, name in zip(runs, "gc")]

    examples = _examples()
    graph, compiled = both(lambda config: modeling.BertClassifier(config, 3), lambda run, name: classifier_task.predict(
        run, examples, ["0", "1", "2"], TOKENIZER, str(tmp_path / f"{name}.tf_record"), 4, 64)[0])
    assert graph.shape == (37, 3)
    np.testing.assert_allclose(compiled, graph, atol=1e-5)

    rng = np.random.default_rng(2)
    sentences = [Sentence(tokens, None, list(range(1, len(tokens) + 1)), "f") for tokens in
                 ([str(w) for w in rng.choice(WORDS, size=int(rng.integers(2, 20)))] for _ in range(9))]
    for crf in (False, True):
        tags = both(lambda config, crf=crf: modeling.BertTokenClassifier(config, 3, crf=crf),
                    lambda run, name, crf=crf: ner_task.predict_tags(run, sentences, TOKENIZER, ["O", "B-X", "I-X"],
                                                                     64, 4, crf))
        assert tags[0] == tags[1]

    choices = [ChoiceExample(_text(rng, int(rng.integers(3, 25))), "", [_text(rng, 3), _text(rng, 5)], 0, f"f:{i}")
               for i in range(5)]
    graph, compiled = both(lambda config: modeling.BertMultipleChoice(config),
                           lambda run, name: choice_task.predict_probabilities(run, choices, TOKENIZER, 64, 4))
    np.testing.assert_allclose(compiled, graph, atol=1e-5)

    from conftest import allennlp_fixture

    from bert_realformer.tasks.squad.reading import read_squad_examples
    squad, _ = read_squad_examples(allennlp_fixture("squad.json"), is_training=False)
    (predictions, nbest, _), (compiled_predictions, compiled_nbest, _) = both(
        lambda config: modeling.BertSpanLabeler(config),
        lambda run, name: squad_task.predict(run, squad, TOKENIZER, SQUAD_OPTIONS, 64, 4))
    assert compiled_predictions == predictions
    for question, candidates in nbest.items():
        assert [c["text"] for c in compiled_nbest[question]] == [c["text"] for c in candidates]
        for key in ("start_logit", "end_logit", "probability"):
            np.testing.assert_allclose([c[key] for c in compiled_nbest[question]], [c[key] for c in candidates],
                                       atol=1e-5)

    cut = [compiled_driver(lambda config: modeling.BertClassifier(config, 3)).trim(
        {"input_mask": tf.constant([[1] * n + [0] * (64 - n)])})["input_mask"].shape[1] for n in (3, 17, 33, 60)]
    assert cut == [16, 32, 48, 64]


def test_trim_to_longest_by_hand():
    mask = tf.constant([[1] * 3 + [0] * 29, [1] * 10 + [0] * 22])
    trimmed = padding.trim_to_longest({"input_ids": mask * 5, "input_mask": mask, "label_ids": tf.constant([1, 2])})
    assert trimmed["input_ids"].shape == (2, 16) and trimmed["label_ids"].shape == (2,)
    full = tf.ones([1, 30], tf.int32)
    assert padding.trim_to_longest({"input_mask": full})["input_mask"].shape == (1, 30)  # never past the length
