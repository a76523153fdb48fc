"""Pre-LN, RealFormer, mixed precision, XLA and gradients (beyond what the fixtures cover)."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import write_config
from bert_realformer.checkpoints.formats import ReadOptions, get
from modeling.bert import BLOCK_SCOPES

TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=32, type_vocab_size=2,
            initializer_range=0.5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _batch(batch=2, seq=8, vocab=50, lengths=(8, 5), seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, vocab, size=(batch, seq)).astype("int32")
    mask = np.zeros((batch, seq), "int32")
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    types = np.zeros((batch, seq), "int32")
    types[:, seq // 2:] = 1
    return {"input_ids": ids * mask, "input_mask": mask, "token_type_ids": types * mask}


# --------------------------------------------------------------- NumPy reference of Pre-LN
def _ln(x, w, name):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[name + "/gamma"] + w[name + "/beta"]


def _dense(x, w, name):
    return x @ w[name + "/kernel"] + w[name + "/bias"]


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _pre_ln_reference(w, inputs, config):
    """Pre-LN BERT written out by hand in float64: x + Attn(LN(x)), x + FFN(LN(x)), final LN."""
    ids, mask, types = inputs["input_ids"], inputs["input_mask"], inputs["token_type_ids"]
    batch, seq = ids.shape
    heads, size = config.num_attention_heads, config.size_per_head
    x = (w["bert/embeddings/word_embeddings"][ids] + w["bert/embeddings/token_type_embeddings"][types]
         + w["bert/embeddings/position_embeddings"][:seq][None])
    x = _ln(x, w, "bert/embeddings/LayerNorm")
    adder = (1.0 - mask[:, None, None, :]) * -10000.0
    for layer in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{layer}"
        h = _ln(x, w, f"{p}/attention/LayerNorm")
        split = lambda t: t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (split(_dense(h, w, f"{p}/attention/self/{n}")) for n in ("query", "key", "value"))
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        x = x + _dense(context, w, f"{p}/attention/output/dense")
        h = _ln(x, w, f"{p}/intermediate/LayerNorm")
        x = x + _dense(_gelu(_dense(h, w, f"{p}/intermediate/dense")), w, f"{p}/output/dense")
    return _ln(x, w, "bert/encoder/LayerNorm")


def _randomise(model, seed=1):
    """Non-trivial LayerNorm and bias values, so a swapped parameter shows."""
    rng = np.random.RandomState(seed)
    for name, variable in modeling.tf1_variable_map(model).items():
        if len(variable.shape) == 1:
            base = 1.0 if name.endswith("gamma") else 0.0
            variable.assign((base + rng.normal(0, 0.2, variable.shape)).astype("float32"))


def test_pre_ln_matches_hand_written_block_order_and_final_layer_norm():
    config = modeling.BertConfig(**TINY, layer_norm_type="pre")
    model = modeling.BertModel(config)
    _randomise(model)
    inputs = _batch()
    weights = {n: v.numpy().astype("float64") for n, v in modeling.tf1_variable_map(model).items()}
    expected = _pre_ln_reference(weights, inputs, config)
    out = model(inputs)
    np.testing.assert_allclose(out["sequence_output"], expected, atol=2e-5)
    np.testing.assert_allclose(out["all_encoder_layers"][-1], expected, atol=2e-5)


def test_one_token_type_is_added_at_every_position_whatever_the_segment_ids():
    """RoBERTa's `type_vocab_size` 1: the hand-written reference with every type 0, for inputs
    whose second halves are segment 1 (a pair's B, packed as BERT packs it)."""
    config = modeling.BertConfig(**{**TINY, "type_vocab_size": 1}, layer_norm_type="pre")
    model = modeling.BertModel(config)
    _randomise(model)
    inputs = _batch()
    assert inputs["token_type_ids"].any()
    weights = {n: v.numpy().astype("float64") for n, v in modeling.tf1_variable_map(model).items()}
    expected = _pre_ln_reference(weights, {**inputs, "token_type_ids": np.zeros_like(inputs["token_type_ids"])},
                                 config)
    np.testing.assert_allclose(model(inputs)["sequence_output"], expected, atol=2e-5)


def test_pre_ln_with_zero_sublayers_is_final_layer_norm_of_embeddings():
    """Zeroing both sublayer outputs makes every Pre-LN block the identity (post-LN would
    still re-normalise), so the output is exactly the final LayerNorm of the embeddings."""
    config = modeling.BertConfig(**TINY, layer_norm_type="pre")
    model = modeling.BertModel(config)
    _randomise(model)
    for block in model.encoder.blocks:
        for layer in (block.attention_output, block.output_dense):
            layer.kernel.assign(np.zeros(layer.kernel.shape, "float32"))
            layer.bias.assign(np.zeros(layer.bias.shape, "float32"))
    out = model(_batch())
    final = model.encoder.final_layer_norm(out["embedding_output"])
    np.testing.assert_allclose(out["sequence_output"], final, atol=1e-6)
    np.testing.assert_allclose(out["all_encoder_layers"][0], out["embedding_output"], atol=1e-6)


def test_attention_layer_function_returns_context_and_running_sum():
    rng = np.random.RandomState(0)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    prev = rng.normal(size=(2, 2, 5, 5)).astype("float32")
    context, scores = modeling.attention_layer(x, x, attention_mask=mask, num_attention_heads=2,
                                               size_per_head=4, prev_attens=prev,
                                               residual_attention="sum", layer_index=1)
    assert context.shape == (2, 5, 8) and scores.shape == (2, 2, 5, 5)
    assert _dtype(scores) == "float32"
    # The carried sum is unmasked: padded keys keep ordinary values, not -10000.
    assert np.abs(np.asarray(scores)[1, :, :, 3:]).max() < 100


def test_attention_probs_output_and_padding():
    config = modeling.BertConfig(**TINY, residual_attention="mean")
    out = modeling.BertModel(config)(_batch(), output_attention_probs=True)
    probs = [np.asarray(p) for p in out["attention_probs"]]
    assert len(probs) == 2 and probs[0].shape == (2, 2, 8, 8)
    np.testing.assert_allclose(sum(p.sum(-1) for p in probs) / 2, 1.0, atol=1e-5)
    assert max(p[1, :, :, 5:].max() for p in probs) < 1e-3  # padded keys get ~no weight


# --------------------------------------------------------------- mixed precision
def _deep_realformer_outputs(policy, weights=None):
    keras.config.set_dtype_policy(policy)
    config = modeling.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=24,
                                 num_attention_heads=4, intermediate_size=64,
                                 max_position_embeddings=128, type_vocab_size=2,
                                 initializer_range=0.1, residual_attention="sum")
    model = modeling.BertModel(config)
    model.build()
    if weights is not None:
        model.set_weights(weights)
    # Long padding: 6 real tokens out of 128 in one row.
    inputs = _batch(batch=2, seq=128, vocab=60, lengths=(128, 6))
    out = model(inputs, output_attention_probs=True)
    return model, out


@pytest.mark.parametrize("policy,atol", [("mixed_bfloat16", 0.15), ("mixed_float16", 0.02)])
def test_mixed_precision_deep_realformer_stays_finite_and_close(float32_policy, policy, atol):
    reference_model, reference = _deep_realformer_outputs("float32")
    model, out = _deep_realformer_outputs(policy, reference_model.get_weights())
    assert all(w.dtype == "float32" for w in model.weights)
    seq = np.asarray(ops_float(out["sequence_output"]))
    assert np.isfinite(seq).all()
    assert _dtype(out["sequence_output"]) == policy.split("_")[1]
    np.testing.assert_allclose(seq, reference["sequence_output"], atol=atol)
    for probs in out["attention_probs"]:
        assert _dtype(probs) == "float32"
        assert np.isfinite(np.asarray(probs)).all()


def test_running_sum_is_float32_under_fp16(float32_policy):
    keras.config.set_dtype_policy("mixed_float16")
    layer = modeling.AttentionLayer(num_attention_heads=2, size_per_head=4,
                                    residual_attention="sum", layer_index=3)
    x = np.ones((1, 3, 8), "float32")
    # A carried sum beyond the fp16 range must survive.
    prev = np.full((1, 2, 3, 3), 70000.0, "float32")
    context, scores = layer(x, x, attention_mask=np.ones((1, 3), "int32"), prev_attens=prev)
    assert _dtype(scores) == "float32" and _dtype(context) == "float16"
    assert np.isfinite(np.asarray(scores)).all() and np.asarray(scores).min() > 65504


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def ops_float(x):
    return keras.ops.cast(x, "float32")


# --------------------------------------------------------------- XLA and gradients
def test_jit_compiled_train_step_reaches_every_weight():
    config = modeling.BertConfig(**{**TINY, "hidden_dropout_prob": 0.1,
                                    "attention_probs_dropout_prob": 0.1},
                                 residual_attention="sum")
    model = modeling.BertPretrainer(config)
    model.build()
    features = {**_batch(), "masked_lm_positions": np.array([[1, 2], [3, 0]], "int32"),
                "masked_lm_ids": np.array([[5, 6], [7, 0]], "int32"),
                "masked_lm_weights": np.array([[1, 1], [1, 0]], "float32"),
                "next_sentence_labels": np.array([[0], [1]], "int32")}
    variables = model.trainable_variables

    @tf.function(jit_compile=True)
    def step(features):
        with tf.GradientTape() as tape:
            loss = modeling.pretraining_losses(model(features, training=True), features)["total_loss"]
        grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            v.assign_sub(0.01 * tf.convert_to_tensor(g))
        return loss, [tf.convert_to_tensor(g) for g in grads]

    first, grads = step(features)
    assert all(g is not None for g in grads)
    names = {id(v): n for n, v in modeling.tf1_variable_map(model).items()}
    zero = [names[id(v)] for v, g in zip(variables, grads) if not np.any(np.asarray(g))]
    assert zero == []
    for _ in range(20):
        last, _ = step(features)
    assert np.isfinite(last) and last < first


def test_gradient_flows_through_the_residual_attention_path():
    """Layer 1 sees layer 0 only through `prev_attens` here, so layer 0's query kernel gets a
    gradient exactly when the running sum is carried (and none when it is cut)."""
    rng = np.random.RandomState(0)
    x = tf.constant(rng.normal(size=(2, 5, 8)).astype("float32"))
    layer0 = modeling.AttentionLayer(num_attention_heads=2, size_per_head=4, residual_attention="sum")
    layer1 = modeling.AttentionLayer(num_attention_heads=2, size_per_head=4,
                                     residual_attention="sum", layer_index=1)

    def grad(cut):
        with tf.GradientTape() as tape:
            _, scores = layer0(x, x)
            if cut:
                scores = tf.stop_gradient(scores)
            context, _ = layer1(x, x, prev_attens=scores)
            loss = tf.reduce_sum(context ** 2)
        return tape.gradient(loss, layer0.query.kernel)

    assert np.abs(grad(cut=False)).max() > 1e-4
    assert grad(cut=True) is None


# --------------------------------------------------------------- ALBERT's shared layers
def _distinct_copies(shared_model, config):
    """The weights of an ALBERT-shaped model by TF1 name, and, for a model of distinct BERT-named
    layers, each layer's copy of the group's weights its ALBERT layer runs."""
    shared = {name: np.asarray(v) for name, v in modeling.tf1_variable_map(shared_model).items()}
    bert, albert = (BLOCK_SCOPES[naming][config.layer_norm_type] for naming in ("bert", "albert"))
    ours_to_albert = {bert[role]: albert[role] for role in bert}
    copies = {}
    for layer in range(config.num_hidden_layers):
        group = f"bert/encoder/transformer/group_{config.group_of_layer(layer)}/inner_group_0"
        for ours, albert in ours_to_albert.items():
            for part in ("kernel", "bias", "gamma", "beta"):
                if f"{group}/{albert}/{part}" in shared:
                    copies[f"bert/encoder/layer_{layer}/{ours}/{part}"] = shared[f"{group}/{albert}/{part}"]
    return shared, copies


@pytest.mark.parametrize("variant", [dict(residual_attention="sum"), dict(residual_attention="mean"),
                                     dict(layer_norm_type="pre", residual_attention="sum")])
def test_shared_layers_run_as_distinct_layers_holding_the_same_weights(variant):
    """ALBERT's groups (3 layers, 2 groups: layers 0 and 1 share) carry RealFormer's running
    score sum (and mean's depth) across a shared block as across distinct ones: the model equals
    a 3-layer one whose layers hold copies of their group's weights, fed the projected
    embeddings."""
    config = modeling.BertConfig(**{**TINY, "num_hidden_layers": 3, "embedding_size": 8, "num_hidden_groups": 2,
                                    **variant})
    shared_model = modeling.BertModel(config)
    inputs = _batch()
    shared_model(inputs)
    _randomise(shared_model)
    assert len(shared_model.encoder.blocks) == 2
    shared, copies = _distinct_copies(shared_model, config)
    distinct = modeling.BertModel(modeling.BertConfig(**{**TINY, "num_hidden_layers": 3, **variant}))
    distinct(inputs)
    for name, variable in modeling.tf1_variable_map(distinct).items():
        if name in copies:
            variable.assign(copies[name])
        elif name in shared and shared[name].shape == tuple(variable.shape):  # Pre-LN's final norm, the pooler
            variable.assign(shared[name])
    expected_out = shared_model(inputs, output_attention_probs=True)
    projected = np.asarray(shared_model.encoder.embedding_projection(expected_out["embedding_output"]))
    layers, probs = distinct.encoder(projected, attention_mask=inputs["input_mask"], return_probs=True)
    np.testing.assert_allclose(np.asarray(layers[-1]), expected_out["sequence_output"], atol=1e-5)
    for got, expected in zip(probs, expected_out["attention_probs"], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-6)


def test_an_albert_checkpoint_of_equal_widths_has_no_projection_and_computes_the_unprojected_function(tmp_path,
                                                                                                      caplog):
    """google-research/albert projects the embeddings only where they are narrower than the
    layers: a TF1 checkpoint with `embedding_size` == `hidden_size` holds no
    `embedding_hidden_mapping_in`. Read, it computes what distinct BERT layers holding the group's
    weights compute on the embeddings themselves, the projection loaded as the identity and said
    so; converted, the identity is written (a Hugging Face `AlbertModel` always has one). Where
    the widths differ, a missing projection stays missing."""
    config = modeling.BertConfig(**{**TINY, "num_hidden_layers": 3, "embedding_size": 16, "num_hidden_groups": 1})
    written = modeling.BertModel(config)
    _randomise(written)
    shared, copies = _distinct_copies(written, config)
    projection = "bert/encoder/embedding_hidden_mapping_in"
    unprojected = {name: value for name, value in shared.items() if not name.startswith(projection)}
    assert len(unprojected) == len(shared) - 2
    checkpoints.write_tf1_checkpoint(unprojected, str(tmp_path / "bert_model.ckpt"))
    write_config(config, str(tmp_path / "bert_config.json"))

    loaded = modeling.BertModel(config)
    report = checkpoints.load_tf1_checkpoint(loaded, str(tmp_path / "bert_model.ckpt"))
    assert report.missing == [] and report.identity == [f"{projection}/bias", f"{projection}/kernel"]
    assert f"{projection} as the identity" in report.summary()
    distinct = modeling.BertModel(modeling.BertConfig(**{**TINY, "num_hidden_layers": 3}))
    for name, variable in modeling.tf1_variable_map(distinct).items():
        variable.assign(copies.get(name, shared.get(name)))
    inputs = _batch()
    np.testing.assert_allclose(loaded(inputs)["sequence_output"], distinct(inputs)["sequence_output"], atol=1e-5)

    weights = get("tf1").read(str(tmp_path / "bert_model.ckpt"), ReadOptions(target="hf"))
    np.testing.assert_array_equal(weights.values[f"{projection}/kernel"], np.eye(16))
    np.testing.assert_array_equal(weights.values[f"{projection}/bias"], np.zeros(16))
    assert any(note.startswith(f"{projection}: not in ") for note in weights.notes)
    with caplog.at_level("INFO", logger="bert_realformer.checkpoints.pretrained"):
        encoder = checkpoints.from_pretrained(str(tmp_path))
    assert f"{projection}: not in " in caplog.text
    np.testing.assert_allclose(encoder(inputs)["sequence_output"], distinct(inputs)["sequence_output"], atol=1e-5)

    narrower = config.replace(embedding_size=8)
    values = {name: np.asarray(variable) for name, variable in
              modeling.tf1_variable_map(modeling.BertModel(narrower)).items() if not name.startswith(projection)}
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "narrow" / "bert_model.ckpt"))
    report = checkpoints.load_tf1_checkpoint(modeling.BertModel(narrower), str(tmp_path / "narrow" / "bert_model.ckpt"))
    assert report.missing == [f"{projection}/kernel", f"{projection}/bias"] and report.identity == []
