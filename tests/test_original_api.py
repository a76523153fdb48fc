"""Code written against the original's `tokenization` and `modeling` modules runs unchanged:
their public (and test-used) names, the original's model functions against numpy by hand, the
config accepted as the original accepts it and checked when a model is built, the helpers, and
inputs of the wrong rank as one clear error."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import modeling
import tokenization
from bert_realformer.checkpoints.config_files import read_config

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ORIGINAL_TOKENIZATION_NAMES = (
    "FullTokenizer", "BasicTokenizer", "WordpieceTokenizer", "load_vocab", "convert_by_vocab",
    "convert_tokens_to_ids", "convert_ids_to_tokens", "whitespace_tokenize", "convert_to_unicode",
    "printable_text", "validate_case_matches_checkpoint", "_is_whitespace", "_is_control", "_is_punctuation")


ORIGINAL_MODELING_NAMES = (
    "BertConfig", "BertModel", "gelu", "get_activation", "get_assignment_map_from_checkpoint", "dropout",
    "layer_norm", "layer_norm_and_dropout", "create_initializer", "embedding_lookup", "embedding_postprocessor",
    "create_attention_mask_from_input_mask", "attention_layer", "transformer_model", "get_shape_list",
    "reshape_to_matrix", "reshape_from_matrix", "assert_rank")


def test_every_name_of_the_original_modules_is_there():
    assert not [name for name in ORIGINAL_TOKENIZATION_NAMES if not hasattr(tokenization, name)]
    assert not [name for name in ORIGINAL_MODELING_NAMES if not hasattr(modeling, name)]


def _layer_norm(x):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def test_the_original_functions_compute_what_the_original_computes():
    """Each function against numpy by hand, with the weights it made (read back, or handed to it
    through `new_table`): the mask, dropout, LayerNorm, the embedding lookup (one-hot too) and
    post-processing."""
    rng = np.random.default_rng(0)
    to_mask = np.array([[1, 1, 0], [1, 0, 0]], "int32")
    mask = np.asarray(modeling.create_attention_mask_from_input_mask(np.zeros((2, 4, 8), "float32"), to_mask))
    np.testing.assert_array_equal(mask, np.repeat(to_mask[:, None, :], 4, axis=1).astype("float32"))

    x = rng.normal(size=(2, 3, 8)).astype("float32")
    assert modeling.dropout(x, 0.0) is x and modeling.dropout(x, None) is x
    dropped = np.asarray(modeling.dropout(np.ones((100, 100), "float32"), 0.25))
    assert set(np.unique(dropped)) == {0.0, np.float32(1 / 0.75)} and 0.2 < np.mean(dropped == 0) < 0.3
    np.testing.assert_allclose(np.asarray(modeling.layer_norm(x)), _layer_norm(x), atol=1e-5)
    np.testing.assert_allclose(np.asarray(modeling.layer_norm_and_dropout(x, 0.0)), _layer_norm(x), atol=1e-5)

    ids = np.array([[3, 1, 4], [1, 5, 9]], "int32")
    for one_hot in (False, True):
        output, table = modeling.embedding_lookup(ids, vocab_size=10, embedding_size=6, use_one_hot_embeddings=one_hot)
        assert tuple(table.shape) == (10, 6) and np.asarray(table).std() < 0.03  # (stddev 0.02, cut at 2)
        np.testing.assert_allclose(np.asarray(output), np.asarray(table)[ids], atol=1e-6)
    output, table = modeling.embedding_lookup(ids[..., None], vocab_size=10, embedding_size=6)
    np.testing.assert_allclose(np.asarray(output), np.asarray(table)[ids], atol=1e-6)

    tables = {"token_type_embeddings": rng.normal(size=(2, 8)), "position_embeddings": rng.normal(size=(5, 8))}
    types = np.array([[0, 1, 1], [0, 0, 1]], "int32")
    import keras

    from modeling import functional
    made = functional.new_table
    try:
        functional.new_table = lambda name, shape, _: keras.Variable(tables[name].astype("float32"), name=name)
        output = modeling.embedding_postprocessor(x, use_token_type=True, token_type_ids=types,
                                                  token_type_vocab_size=2, max_position_embeddings=5,
                                                  dropout_prob=0.0)
    finally:
        functional.new_table = made
    by_hand = _layer_norm(x + tables["token_type_embeddings"][types] + tables["position_embeddings"][None, :3])
    np.testing.assert_allclose(np.asarray(output), by_hand, atol=1e-5)
    with pytest.raises(ValueError, match="token_type_ids"):
        modeling.embedding_postprocessor(x, use_token_type=True)
    with pytest.raises(ValueError, match="sequence length 3 exceeds max_position_embeddings 2"):
        modeling.embedding_postprocessor(x, max_position_embeddings=2)


def test_transformer_model_is_the_original_post_ln_transformer():
    """One layer of two heads by hand in numpy (the original's equations) with the weights
    `transformer_model` made (a padded key masked out); every layer's output, with another
    activation; the original's shape errors."""
    from modeling import functional
    built = []

    class Recorded(functional.TransformerEncoder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    input_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "int32")
    mask = modeling.create_attention_mask_from_input_mask(x, input_mask)
    made = functional.TransformerEncoder
    try:
        functional.TransformerEncoder = Recorded
        output = modeling.transformer_model(x, mask, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                            intermediate_size=16, hidden_dropout_prob=0.0,
                                            attention_probs_dropout_prob=0.0)
    finally:
        functional.TransformerEncoder = made
    block = built[0].blocks[0]

    def dense(layer, inputs):
        return inputs @ np.asarray(layer.kernel) + np.asarray(layer.bias)

    def heads(t):  # [B, S, 8] -> [B, 2, S, 4]
        return t.reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)

    attention = block.attention
    q, k, v = (heads(dense(layer, x)) for layer in (attention.query, attention.key, attention.value))
    scores = q @ k.transpose(0, 1, 3, 2) / 2.0 + (1.0 - np.asarray(mask)[:, None]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 4, 8)
    h = _layer_norm(dense(block.attention_output, context) + x)
    by_hand = _layer_norm(dense(block.output_dense, _gelu(dense(block.intermediate, h))) + h)
    np.testing.assert_allclose(np.asarray(output), by_hand, atol=1e-4)

    layers = modeling.transformer_model(x, mask, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                                        intermediate_size=16, intermediate_act_fn=tf.nn.relu,
                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                        do_return_all_layers=True)
    assert len(layers) == 3 and all(tuple(layer.shape) == (2, 4, 8) for layer in layers)
    with pytest.raises(ValueError, match=r"The hidden size \(8\) is not a multiple of the number of attention "
                                         r"heads \(3\)"):
        modeling.transformer_model(x, hidden_size=8, num_attention_heads=3)
    with pytest.raises(ValueError, match=r"The width of the input tensor \(8\) != hidden size \(16\)"):
        modeling.transformer_model(x, hidden_size=16, num_attention_heads=2)


def test_module_level_conversions_and_character_classes(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("[UNK]\n[CLS]\nhe\n##llo\nworld\n")
    vocab = tokenization.load_vocab(str(vocab_file))
    inv_vocab = {index: token for token, index in vocab.items()}
    assert tokenization.convert_tokens_to_ids(vocab, ["he", "##llo", "world"]) == [2, 3, 4]
    assert tokenization.convert_ids_to_tokens(inv_vocab, [4, 0]) == ["world", "[UNK]"]
    assert tokenization.convert_by_vocab(vocab, ["[CLS]"]) == [1]
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    tokens = tokenizer.tokenize("Hello WORLD")
    assert tokens == ["he", "##llo", "world"]
    assert tokenizer.convert_tokens_to_ids(tokens) == tokenization.convert_tokens_to_ids(vocab, tokens)
    assert tokenization.printable_text(b"caf\xc3\xa9 \xff") == "café "  # invalid bytes dropped
    assert tokenization.printable_text("naïve") == "naïve"
    # Character classes (own cases): no-break space is whitespace, zero-width space a format
    # control, tab neither control nor punctuation, '$' and '«' punctuation, '5' none of them.
    assert tokenization._is_whitespace("\u00a0") and tokenization._is_whitespace("\t")
    assert not tokenization._is_whitespace("x")
    assert tokenization._is_control("\u200b") and tokenization._is_control("\x07")
    assert not tokenization._is_control("\t") and not tokenization._is_control("a")
    assert tokenization._is_punctuation("$") and tokenization._is_punctuation("«")
    assert not tokenization._is_punctuation("5") and not tokenization._is_punctuation(" ")


def test_the_config_accepts_what_the_original_accepts_and_the_model_build_checks_it():
    config = modeling.BertConfig(vocab_size=99, hidden_size=37)  # 12 heads do not divide 37
    assert '"hidden_size": 37' in config.to_json_string()
    with pytest.raises(modeling.ConfigError, match=r"^BertConfig: hidden_size \(37\) must be divisible by "
                                                   r"num_attention_heads \(12\)$"):
        modeling.BertModel(config)
    partial = modeling.BertConfig.from_dict({"hidden_size": 32, "num_attention_heads": 4})
    assert partial.vocab_size is None
    with pytest.raises(modeling.ConfigError, match="vocab_size is required"):
        modeling.BertPretrainer(partial)
    modeling.BertModel(partial.replace(vocab_size=50, num_hidden_layers=1, intermediate_size=8))


def test_shape_helpers():
    x = np.zeros((2, 5, 8), "float32")
    assert modeling.get_shape_list(x, expected_rank=3) == [2, 5, 8]
    with pytest.raises(ValueError, match=r"^x must have rank 2 or 4, got rank 3 \(shape \[2, 5, 8\]\)$"):
        modeling.assert_rank(x, [2, 4], "x")
    matrix = modeling.reshape_to_matrix(x)
    assert tuple(matrix.shape) == (10, 8)
    np.testing.assert_array_equal(np.asarray(modeling.reshape_from_matrix(matrix, [2, 5, 8])), x)

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 8], tf.float32)])
    def dynamic(t):
        shape = modeling.get_shape_list(t)
        assert isinstance(shape[0], tf.Tensor) and shape[1:] == [5, 8]
        return shape[0]

    assert int(dynamic(x)) == 2
    assert modeling.create_initializer(0.02).stddev == 0.02
    assert modeling.get_activation("gelu") is modeling.gelu


def test_assignment_map_for_our_names():
    config = read_config(os.path.join(DATA, "bert_postln_tiny", "bert_config.json"))
    model = modeling.BertClassifier(config, num_labels=2)
    model.build()
    checkpoint = os.path.join(DATA, "bert_postln_tiny", "bert_model.ckpt")
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(model, checkpoint)
    assert assignment_map["bert/embeddings/word_embeddings"] == "bert/embeddings/word_embeddings"
    assert "output_weights" not in assignment_map  # the classifier head is not in a pretrained checkpoint
    assert initialized["bert/pooler/dense/kernel"] == 1 and initialized["bert/pooler/dense/kernel:0"] == 1
    assert len(assignment_map) == len(modeling.tf1_variable_map(model)) - 2


@pytest.mark.parametrize("shape", [(4,), (1, 2, 4)])
def test_input_ids_of_the_wrong_rank_is_one_clear_error(shape):
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=8)
    model = modeling.BertModel(config)
    with pytest.raises(ValueError, match=rf"input_ids \[batch_size, seq_length\] must have rank 2, got rank "
                                         rf"{len(shape)}"):
        model({"input_ids": np.ones(shape, "int32")})


def test_the_calls_the_original_scripts_open_with_run_unchanged():
    """The first lines of the original's run_classifier.py, run_pretraining.py and
    extract_features.py: the config from its file (every key as written), the case check
    against the checkpoint's name, the tokenizer from the vocabulary."""
    release = os.path.join(DATA, "bert_postln_tiny")
    bert_config = modeling.BertConfig.from_json_file(os.path.join(release, "bert_config.json"))
    written = json.load(open(os.path.join(release, "bert_config.json")))
    assert {key: bert_config.to_dict()[key] for key in written} == written
    tokenization.validate_case_matches_checkpoint(True, os.path.join(release, "bert_model.ckpt"))
    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(release, "vocab.txt"), do_lower_case=True)
    assert len(tokenizer.vocab) == bert_config.vocab_size
