"""Prediction by TensorFlow Lite (`inference.lite`, `Predictor(engine="tflite")`): the graph's outputs
for every variant over batches of several sizes and lengths, features passed through as they
are, weights that move between predictions followed, int8 weights near float, and one-line
refusals; model.tflite in the export."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer.errors import InputError
from bert_realformer.inference.engines import LITE_MODEL, _read_ahead, engine_for
from bert_realformer.inference.lite import LiteFunction, lite_interpreter
from bert_realformer.inference.predictor import Predictor

STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")
SHAPES = [(4, 16), (1, 24), (4, 8), (3, 40), (1, 16)]  # (batch, length): dynamic padding's batches


def _model(**variant):
    config = modeling.BertConfig(vocab_size=60, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, max_position_embeddings=64, **variant)
    model = modeling.BertClassifier(config, num_labels=3)
    model.build()
    return model


def _batches():
    """A dataset of SHAPES' batches (spec [None, None]), some rows padded, with each row's index."""
    rng = np.random.default_rng(5)
    batches, start = [], 0
    for rows, length in SHAPES:
        ids = rng.integers(1, 60, (rows, length)).astype(np.int32)
        mask = (np.arange(length) < rng.integers(length // 2, length + 1, (rows, 1))).astype(np.int32)
        batches.append({"input_ids": ids * mask, "input_mask": mask, "segment_ids": np.zeros_like(ids),
                        "example_index": np.arange(start, start + rows, dtype=np.int64)})
        start += rows
    spec = {name: tf.TensorSpec([None] * value.ndim, tf.as_dtype(value.dtype)) for name, value in batches[0].items()}
    return tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=spec)


def logits_and_index(model, features):
    return {"logits": model(features, training=False), "example_index": features["example_index"]}


@pytest.mark.parametrize("variant", [{}, {"layer_norm_type": "pre"}, {"residual_attention": "sum"}],
                         ids=["post-LN", "pre-LN", "RealFormer"])
def test_lite_prediction_gives_the_graphs_outputs(variant):
    model, dataset = _model(**variant), _batches()
    graph = Predictor(STRATEGY, model).predict(dataset, logits_and_index)
    lite = Predictor(STRATEGY, model, "tflite").predict(dataset, logits_and_index)
    assert lite["logits"].shape == (sum(rows for rows, _ in SHAPES), 3)
    np.testing.assert_allclose(lite["logits"], graph["logits"], atol=1e-5)
    assert lite["logits"].std() > 1e-3  # (not a constant that would match anything)
    np.testing.assert_array_equal(lite["example_index"], np.arange(len(lite["logits"])))
    assert lite["example_index"].dtype == np.int64


def test_each_prediction_uses_the_weights_of_its_time():
    """Converted again only when the weights changed: a checksum of their bits."""
    model, dataset = _model(), _batches()
    predictor = Predictor(STRATEGY, model, "tflite")
    before = predictor.predict(dataset, logits_and_index)["logits"]
    lite = predictor.engine.functions
    converted = lite.get(logits_and_index, dataset.element_spec)
    assert lite.get(logits_and_index, dataset.element_spec) is converted  # (unchanged: kept)
    model.layers[-1].weights[0].assign_add(np.full(model.layers[-1].weights[0].shape, 1e-7, np.float32))
    assert lite.get(logits_and_index, dataset.element_spec) is not converted  # (a 1e-7 change: told)
    model.layers[-1].weights[0].assign(-2.0 * model.layers[-1].weights[0])  # training moved the head
    after = predictor.predict(dataset, logits_and_index)["logits"]
    graph_after = Predictor(STRATEGY, model).predict(dataset, logits_and_index)["logits"]
    assert np.abs(after - before).max() > 0.01
    np.testing.assert_allclose(after, graph_after, atol=1e-5)


@pytest.mark.parametrize("lite", [False, True], ids=["graph", "lite"])
def test_prediction_on_cpus_reads_its_batches_without_tf_data_autotuning(monkeypatch, lite):
    """(its tuning competed with the model for a few cores)"""
    iterated = []
    original = tf.data.Dataset.__iter__

    def spy(dataset):
        iterated.append(dataset.options().autotune.enabled)
        return original(dataset)
    model, dataset = _model(), _batches()
    monkeypatch.setattr(tf.data.Dataset, "__iter__", spy)
    logits = Predictor(STRATEGY, model, "tflite" if lite else "graph").predict(dataset, logits_and_index)["logits"]
    assert logits.shape[0] == sum(rows for rows, _ in SHAPES)
    assert iterated == [False]
    assert dataset.options().autotune.enabled is not False  # (the caller's dataset unchanged)


@pytest.mark.parametrize("chunk", [2, 64])
def test_batches_read_ahead_together_are_each_batch_as_it_was(chunk):
    """Read `chunk` at a time, padded to one shape and cut back: every batch's arrays as tf.data
    gives them one by one (values, dtypes, shapes; a text feature and a per-row number among
    them), in order, the last chunk short; a tensor of unknown rank: read one by one."""
    texts = tf.data.Dataset.from_tensor_slices([b"a", b"bb", b"", b"ccc", b"d"])
    known = tf.data.Dataset.zip(_batches(), texts).map(
        lambda features, text: {**features, "text": tf.fill([tf.shape(features["input_ids"])[0]], text)})
    arrays = [{"any_rank": np.arange(rows * length, dtype=np.int32).reshape([rows, length] if rank == 2 else -1)}
              for (rows, length), rank in zip(SHAPES, [2, 1, 2, 1, 2])]
    unknown = tf.data.Dataset.from_generator(lambda: iter(arrays),
                                             output_signature={"any_rank": tf.TensorSpec(None, tf.int32)})
    for dataset in (known, unknown):
        expected = list(dataset.as_numpy_iterator())
        read = list(_read_ahead(dataset, chunk))
        assert len(read) == len(expected) == len(SHAPES)
        for got, want in zip(read, expected):
            assert set(got) == set(want)
            for name, value in want.items():
                assert (got[name].dtype, got[name].shape) == (value.dtype, value.shape), name
                np.testing.assert_array_equal(got[name], value)


def test_int8_is_near_float_in_less_than_half_the_bytes():
    model, dataset = _model(), _batches()
    spec = {name: s for name, s in dataset.element_spec.items()}

    def logits(features):
        return {"logits": model(features, training=False)}
    float32, int8 = LiteFunction(logits, spec), LiteFunction(logits, spec, int8=True)
    assert int8.size < 0.5 * float32.size  # (the weights, nearly all of the model, in a quarter of the bytes)
    graph = Predictor(STRATEGY, model).predict(dataset, logits_and_index)["logits"]
    quantized = Predictor(STRATEGY, model, "tflite-int8").predict(dataset, logits_and_index)["logits"]
    assert 1e-6 < np.abs(quantized - graph).max() < 0.05


def test_a_function_lite_cannot_run_runs_in_the_graph_with_a_warning(caplog):
    model, dataset = _model(), _batches()

    def logits_and_determinant(model, features):
        logits = model(features, training=False)
        return {"logits": logits, "det": tf.linalg.det(tf.reshape(tf.tile(logits, [1, 3]), [-1, 3, 3]))}
    graph = Predictor(STRATEGY, model).predict(dataset, logits_and_determinant)
    lite = Predictor(STRATEGY, model, "tflite-int8").predict(dataset, logits_and_determinant)
    np.testing.assert_array_equal(lite["logits"], graph["logits"])
    assert ("tflite_prediction: TensorFlow Lite cannot run this prediction graph (it has no MatrixDeterminant): it "
            "runs in TensorFlow's graph (float32)") in caplog.text


def test_what_lite_prediction_cannot_run_is_one_line():
    model = _model()
    with pytest.raises(InputError, match="not XLA's: leave xla_prediction off"):
        engine_for(xla=True, tflite=True)
    model.dtype_policy = "mixed_bfloat16"
    with pytest.raises(InputError, match="the model computes in bfloat16: leave mixed_precision at none"):
        Predictor(STRATEGY, model, "tflite")
    spec = {"input_ids": tf.TensorSpec([None, None], tf.int32)}
    with pytest.raises(InputError) as raised:
        LiteFunction(lambda features: {"det": tf.linalg.det(tf.cast(features["input_ids"], tf.float32))}, spec)
    assert str(raised.value) == ("tflite_prediction: TensorFlow Lite cannot run this prediction graph (it has no "
                                 "MatrixDeterminant)")
    assert raised.value.options == ("tflite_prediction",)
    with pytest.raises(InputError, match="a flat dict of tensors"):
        LiteFunction(lambda features: features, (tf.TensorSpec([None], tf.int32),))


@pytest.mark.parametrize("thresholds", [None, [0.3, 0.5, 0.7]], ids=["softmax", "multi-label"])
def test_the_export_holds_the_model_for_tensorflow_lite(tmp_path, thresholds):
    """model.tflite beside the SavedModel: the classifier's outputs on packed sequences, named as
    the SavedModel names them (but the string `label`); int8 near them in fewer bytes."""
    _checked_exports(tmp_path, thresholds)


def _checked_exports(tmp_path, thresholds):
    """({precision: the export's model.tflite}, the features checked) after checking both exports."""
    from bert_realformer.inference.engines import make_engine
    from bert_realformer.inference.export import ServedText, export_classifier
    model = _model()
    vocab = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "bert_postln_tiny", "vocab.txt")
    ids = np.random.default_rng(2).integers(1, 60, (3, 12)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    logits = model(features, training=False).numpy()
    files = {}
    for precision in ("float32", "int8"):
        version = export_classifier(model, ServedText(vocab, True, 32), ["a", "b", "c"], str(tmp_path / precision),
                                    thresholds=thresholds,
                                    engine=make_engine("tflite" if precision == "float32" else "tflite-int8", model))
        assert os.path.exists(os.path.join(version, "saved_model.pb"))
        assert open(os.path.join(version, "vocab.txt"), "rb").read() == open(vocab, "rb").read()
        assert open(os.path.join(version, "label_list.txt")).read() == "a\nb\nc\n"
        files[precision] = os.path.join(version, LITE_MODEL)
        outputs = lite_interpreter(open(files[precision], "rb").read()).get_signature_runner()(**features)
        if thresholds is None:
            expected = {"probabilities": tf.nn.softmax(logits).numpy()}
        else:
            expected = {"probabilities": tf.sigmoid(logits).numpy()}
            expected["predicted"] = (expected["probabilities"] >= np.array(thresholds)).astype(np.int32)
        assert sorted(outputs) == sorted(expected)
        tolerance = 1e-6 if precision == "float32" else 0.02
        np.testing.assert_allclose(outputs["probabilities"], expected["probabilities"], atol=tolerance)
        if precision == "float32" and thresholds:
            np.testing.assert_array_equal(outputs["predicted"], expected["predicted"])
    assert os.path.getsize(files["int8"]) < 0.5 * os.path.getsize(files["float32"])
    return files, features


def test_the_exported_model_tflite_runs_without_tensorflow(tmp_path):
    """A server with LiteRT (`ai-edge-litert`, without TensorFlow) gets the interpreter's outputs."""
    files, features = _checked_exports(tmp_path, None)
    code = ("import sys, numpy as np; sys.modules['tensorflow'] = None\n"
            "from ai_edge_litert.interpreter import Interpreter\n"
            "features = dict(np.load(sys.argv[2]))\n"
            "classify = Interpreter(model_path=sys.argv[1]).get_signature_runner()\n"
            "np.save(sys.argv[3], classify(**features)['probabilities'])\n")
    np.savez(tmp_path / "features.npz", **features)
    for precision, path in files.items():
        subprocess.run([sys.executable, "-c", code, path, str(tmp_path / "features.npz"), str(tmp_path / "out.npy")],
                       check=True)
        expected = lite_interpreter(open(path, "rb").read()).get_signature_runner()(**features)["probabilities"]
        np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-6, err_msg=precision)
