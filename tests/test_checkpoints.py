"""TF1 checkpoints: reports, errors, and a round trip the original code can restore."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
POSTLN = os.path.join(DATA, "bert_postln_tiny")
CKPT = os.path.join(POSTLN, "bert_model.ckpt")


def _config(**changes):
    config = read_config(os.path.join(POSTLN, "bert_config.json"))
    return config.replace(**changes) if changes else config


def _io_inputs():
    io = np.load(os.path.join(POSTLN, "io.npz"))
    return {k: io[k] for k in ("input_ids", "input_mask", "token_type_ids")}


def test_encoder_only_model_reports_heads_as_unexpected():
    report = checkpoints.load_tf1_checkpoint(modeling.BertModel(_config()), CKPT)
    assert len(report.loaded) == 55 and not report.missing
    assert sorted(report.unexpected) == sorted(
        ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
         "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
         "cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_bias",
         "cls/seq_relationship/output_weights"])


def test_classifier_head_is_missing_and_stays_initialised():
    model = modeling.BertClassifier(_config(), num_labels=3)
    report = checkpoints.load_tf1_checkpoint(model, CKPT)
    assert report.missing == ["output_weights", "output_bias"]
    assert "output_weights" in report.summary()
    np.testing.assert_array_equal(model.classifier.output_bias.numpy(), np.zeros(3))


def test_span_head_names():
    names = modeling.tf1_variable_map(modeling.BertSpanLabeler(_config()))
    assert names["cls/squad/output_weights"].shape == (2, 32)
    assert names["cls/squad/output_bias"].shape == (2,)


def test_shape_mismatch_names_variable_and_both_shapes():
    model = modeling.BertModel(_config(intermediate_size=40))
    with pytest.raises(checkpoints.CheckpointError) as info:
        checkpoints.load_tf1_checkpoint(model, CKPT)
    message = str(info.value)
    assert "\n" not in message
    assert ("bert/encoder/layer_0/intermediate/dense/kernel has shape [32, 37] in the checkpoint but [32, 40] "
            "in the model") in message


def test_missing_checkpoint_is_a_one_line_error(tmp_path):
    with pytest.raises(checkpoints.CheckpointError, match=r"no TF1 checkpoint found"):
        checkpoints.load_tf1_checkpoint(modeling.BertModel(_config()), str(tmp_path / "model.ckpt"))
    with pytest.raises(checkpoints.CheckpointError, match=r"directory holds no checkpoint"):
        checkpoints.load_tf1_checkpoint(modeling.BertModel(_config()), str(tmp_path))


def test_optimizer_slots_and_global_step_are_ignored(tmp_path):
    values = checkpoints.read_tf1_checkpoint(CKPT)
    names, tensors = [], []
    for name, value in values.items():
        names += [name, name + "/adam_m", name + "/adam_v"]
        tensors += [value, np.zeros_like(value), np.ones_like(value)]
    names.append("global_step")
    tensors.append(np.array(1000, dtype=np.int64))
    prefix = str(tmp_path / "model.ckpt-1000")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
    report = checkpoints.load_tf1_checkpoint(modeling.BertPretrainer(_config()), prefix)
    assert len(report.loaded) == 62 and not report.missing and not report.unexpected


@pytest.mark.parametrize("changes", [{}, {"layer_norm_type": "pre", "residual_attention": "mean"}])
def test_round_trip_and_original_style_restore(tmp_path, changes):
    model = modeling.BertPretrainer(_config(**changes))
    model.build()
    prefix = checkpoints.save_tf1_checkpoint(model, str(tmp_path / "out" / "bert_model.ckpt"))
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint"]
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("bert_model.ckpt")

    expected = {name: v.numpy() for name, v in modeling.tf1_variable_map(model).items()}
    listed = dict(tf.train.list_variables(prefix))
    assert listed == {name: list(value.shape) for name, value in expected.items()}

    # Restore the way the original run_pretraining.py does: variables created by name in a
    # TF1 graph, then tf.train.init_from_checkpoint with an identity assignment map.
    graph = tf.Graph()
    with graph.as_default():
        created = {name: tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.float32)
                   for name, value in expected.items()}
        tf.compat.v1.train.init_from_checkpoint(prefix, {name: name for name in created})
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            restored = session.run(created)
    for name, value in expected.items():
        np.testing.assert_array_equal(restored[name], value)

    fresh = modeling.BertPretrainer(_config(**changes))
    report = checkpoints.load_tf1_checkpoint(fresh, str(tmp_path / "out"))
    assert not report.missing and not report.unexpected
    a = model.bert(_io_inputs())["sequence_output"]
    b = fresh.bert(_io_inputs())["sequence_output"]
    np.testing.assert_array_equal(a, b)


def test_fixture_names_survive_a_round_trip(tmp_path):
    model = modeling.BertPretrainer(_config())
    checkpoints.load_tf1_checkpoint(model, CKPT)
    prefix = checkpoints.save_tf1_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    ours = sorted((n, s) for n, s in tf.train.list_variables(prefix))
    with open(os.path.join(POSTLN, "variables.txt")) as f:
        fixture = sorted((line.split("\t")[0], json.loads(line.split("\t")[1]))
                         for line in f.read().splitlines())
    assert ours == fixture
    original = checkpoints.read_tf1_checkpoint(CKPT)
    written = checkpoints.read_tf1_checkpoint(prefix)
    for name in original:
        np.testing.assert_array_equal(written[name], original[name])


def test_the_index_reader_gives_tensorflows_names_and_shapes_without_it(tmp_path):
    """`bundle_index.stored_shapes` (pure Python, read before TensorFlow starts) against
    TensorFlow's own listing: the original's fixtures, and a checkpoint of 600 tensors (an index
    of several blocks, shared key prefixes, a scalar); anything else is `UnreadableIndex`."""
    from bert_realformer.checkpoints import bundle_index
    many = {f"bert/encoder/layer_{i // 20}/part_{i % 20}/kernel": np.zeros((i % 7 + 1, 3), np.float32)
            for i in range(599)}
    checkpoints.write_tf1_checkpoint({**many, "global_step": np.int64(7)}, str(tmp_path / "many" / "model.ckpt"))
    realformer = os.path.join(DATA, "realformer_tiny", "bert_model.ckpt")
    for prefix in (CKPT, realformer, str(tmp_path / "many" / "model.ckpt")):
        expected = {name: tuple(shape) for name, shape in tf.train.list_variables(prefix)}
        assert bundle_index.stored_shapes(prefix) == expected and len(expected) > 50, prefix
    (tmp_path / "garbage.index").write_bytes(b"\x00" * 100)
    with pytest.raises(bundle_index.UnreadableIndex, match="not a TensorFlow checkpoint index"):
        bundle_index.stored_shapes(str(tmp_path / "garbage"))
