"""The model against outputs of the ORIGINAL BERT and official RealFormer code (tests/data).

Run directly (`python tests/test_model_fixtures.py`) it checks the same under whatever
`KERAS_BACKEND` is set, which `test_backend_parity.py` uses for JAX.
"""

import json
import os

import numpy as np
import pytest

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ATOL = 2e-5  # suggested by the fixtures' READMEs for a float32 port
POSTLN = os.path.join(DATA, "bert_postln_tiny")
REALFORMER = os.path.join(DATA, "realformer_tiny")


def _inputs(arrays):
    return {k: arrays[k] for k in ("input_ids", "input_mask", "token_type_ids")}


def _check_encoder(out, expected):
    np.testing.assert_allclose(out["embedding_output"], expected["embedding_output"], atol=ATOL, rtol=1e-5)
    layers = np.stack([np.asarray(x) for x in out["all_encoder_layers"]])
    assert layers.shape == expected["all_encoder_layers"].shape
    np.testing.assert_allclose(layers, expected["all_encoder_layers"], atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], expected["pooled_output"], atol=ATOL, rtol=1e-5)


def check_postln_fixture():
    config = read_config(os.path.join(POSTLN, "bert_config.json"))
    model = modeling.BertPretrainer(config)
    report = checkpoints.load_tf1_checkpoint(model, os.path.join(POSTLN, "bert_model.ckpt"))
    assert not report.missing and not report.unexpected and len(report.loaded) == 62
    io = np.load(os.path.join(POSTLN, "io.npz"))
    features = {**_inputs(io), "masked_lm_positions": io["masked_lm_positions"],
                "masked_lm_ids": io["masked_lm_ids"], "masked_lm_weights": io["masked_lm_weights"],
                "next_sentence_labels": io["next_sentence_labels"]}
    out = model(features, training=False)
    _check_encoder(out, io)
    losses = modeling.pretraining_losses(out, features)
    np.testing.assert_allclose(np.reshape(out["masked_lm_log_probs"], (-1, config.vocab_size)),
                               io["masked_lm_log_probs"], atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(np.reshape(losses["masked_lm_example_loss"], (-1,)),
                               io["masked_lm_example_loss"], atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(out["next_sentence_log_probs"], io["next_sentence_log_probs"], atol=ATOL)
    np.testing.assert_allclose(losses["next_sentence_example_loss"], io["next_sentence_example_loss"], atol=ATOL)
    for key in ("masked_lm_loss", "next_sentence_loss", "total_loss"):
        np.testing.assert_allclose(losses[key], io[key], atol=ATOL, rtol=1e-5)


def check_realformer_fixture(config_name, io_name):
    config = read_config(os.path.join(REALFORMER, config_name))
    model = modeling.BertModel(config)
    report = checkpoints.load_tf1_checkpoint(model, REALFORMER)  # a directory works too
    assert not report.missing and not report.unexpected and len(report.loaded) == 71
    io = np.load(os.path.join(REALFORMER, io_name))
    _check_encoder(model(_inputs(io), training=False), io)


def test_postln_reproduces_original_bert():
    """From the original's checkpoint, its outputs (io.npz, made by google-research/bert): the
    62 weights loaded and none left over, the embeddings, every layer, the sequence and pooled
    outputs, the MLM and NSP log-probabilities and each loss (`check_postln_fixture` asserts
    each one; the JAX backend test runs the same checks)."""
    check_postln_fixture()


@pytest.mark.parametrize("config_name,io_name,mode", [
    ("bert_config.json", "io_sum.npz", "sum"),
    ("bert_config_running_mean.json", "io_mean.npz", "mean")])
def test_realformer_reproduces_official_code(config_name, io_name, mode):
    config = read_config(os.path.join(REALFORMER, config_name))
    assert config.residual_attention == mode  # read from the official `use_running_mean`
    check_realformer_fixture(config_name, io_name)


def test_plain_bert_on_realformer_checkpoint_is_the_negative_control():
    """The same weights as plain BERT give the original BERT's outputs, not RealFormer's."""
    config = read_config(os.path.join(REALFORMER, "bert_config.json"))
    model = modeling.BertModel(config.replace(residual_attention="none"))
    checkpoints.load_tf1_checkpoint(model, REALFORMER)
    io = np.load(os.path.join(REALFORMER, "io_plain_bert_same_ckpt.npz"))
    out = model(_inputs(io))
    _check_encoder(out, io)
    summed = np.load(os.path.join(REALFORMER, "io_sum.npz"))
    assert np.abs(np.asarray(out["sequence_output"]) - summed["sequence_output"]).max() > 0.5


def _read_variables_txt(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().splitlines():
            name, shape, dtype = line.split("\t")
            rows.append((name, tuple(json.loads(shape)), dtype))
    return rows


@pytest.mark.parametrize("fixture,model_fn", [
    ("bert_postln_tiny", modeling.BertPretrainer),
    ("realformer_tiny", modeling.BertModel)])
def test_variable_list_equals_fixture(fixture, model_fn):
    config = read_config(os.path.join(DATA, fixture, "bert_config.json"))
    names = modeling.tf1_variable_map(model_fn(config))
    ours = sorted((name, tuple(v.shape), str(v.dtype)) for name, v in names.items())
    assert ours == _read_variables_txt(os.path.join(DATA, fixture, "variables.txt"))


if __name__ == "__main__":
    check_postln_fixture()
    check_realformer_fixture("bert_config.json", "io_sum.npz")
    check_realformer_fixture("bert_config_running_mean.json", "io_mean.npz")
    import keras
    print(f"fixtures reproduced on the {keras.backend.backend()} backend")


@pytest.mark.parametrize("config_name,mode", [("bert_config.json", "sum"), ("bert_config_running_mean.json", "mean")])
def test_residual_attention_factor_spans_the_original_bert_and_realformer(config_name, mode):
    """The warm start's two ends on the official RealFormer checkpoint: with the factor at 0 the
    RealFormer model (sum or running mean) gives the ORIGINAL BERT's outputs of the same weights
    (io_plain_bert_same_ckpt.npz), set back to 1 the official RealFormer's; in between, neither."""
    config = read_config(os.path.join(REALFORMER, config_name))
    model = modeling.BertModel(config)
    checkpoints.load_tf1_checkpoint(model, REALFORMER)
    assert modeling.residual_attention_factor(model) == 1.0
    plain = np.load(os.path.join(REALFORMER, "io_plain_bert_same_ckpt.npz"))
    official = np.load(os.path.join(REALFORMER, f"io_{mode}.npz"))
    modeling.set_residual_attention_factor(model, 0.0)
    _check_encoder(model(_inputs(plain), training=False), plain)
    modeling.set_residual_attention_factor(model, 0.5)
    halfway = np.asarray(model(_inputs(plain), training=False)["sequence_output"])
    for ends in (plain, official):
        assert np.abs(halfway - ends["sequence_output"]).max() > 1e-3
    modeling.set_residual_attention_factor(model, 1.0)
    _check_encoder(model(_inputs(official), training=False), official)
    with pytest.raises(ValueError, match="expected a number from 0 to 1"):
        modeling.set_residual_attention_factor(model, 1.5)
    with pytest.raises(ValueError, match="only a RealFormer model"):
        modeling.set_residual_attention_factor(modeling.BertModel(config.replace(residual_attention="none")), 0.0)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_a_warm_started_realformer_is_the_post_ln_checkpoint_at_step_0(mode):
    """The original BERT's checkpoint read as RealFormer with the factor at 0 (a warm start's
    step 0): its pretraining heads and a classifier give the post-LN model's outputs to 1e-6."""
    config = read_config(os.path.join(POSTLN, "bert_config.json"))
    io = np.load(os.path.join(POSTLN, "io.npz"))
    features = {**_inputs(io), "masked_lm_positions": io["masked_lm_positions"]}
    models = {}
    for name, variant in (("post-LN", config), ("RealFormer", config.replace(residual_attention=mode))):
        pretrainer, classifier = modeling.BertPretrainer(variant), modeling.BertClassifier(variant, 3)
        checkpoints.load_tf1_checkpoint(pretrainer, os.path.join(POSTLN, "bert_model.ckpt"))
        classifier.build()
        models[name] = pretrainer, classifier
    head = modeling.tf1_variable_map(models["post-LN"][1])  # (one classifier head for both)
    outputs = {}
    for name, (pretrainer, classifier) in models.items():
        encoder = modeling.tf1_variable_map(pretrainer)
        for weight_name, weight in modeling.tf1_variable_map(classifier).items():
            weight.assign(encoder[weight_name] if weight_name.startswith("bert/") else head[weight_name])
        if name == "RealFormer":
            modeling.set_residual_attention_factor(pretrainer, 0.0)
            modeling.set_residual_attention_factor(classifier, 0.0)
        out = pretrainer(features, training=False)
        outputs[name] = [out["masked_lm_log_probs"], out["next_sentence_log_probs"],
                         classifier(_inputs(io), training=False)]
    for post_ln, warm in zip(outputs["post-LN"], outputs["RealFormer"], strict=True):
        np.testing.assert_allclose(warm, post_ln, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.reshape(outputs["RealFormer"][0], io["masked_lm_log_probs"].shape),
                               io["masked_lm_log_probs"], atol=ATOL, rtol=1e-5)  # (the original's, too)
