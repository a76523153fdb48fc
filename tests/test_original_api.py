"""Code written against the original's `tokenization` and `modeling` modules runs unchanged:
their public (and test-used) names, the config accepted as the original accepts it and checked
when a model is built, the helpers, and inputs of the wrong rank as one clear error."""

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


def test_every_name_of_the_original_tokenization_module_is_there():
    missing = [name for name in ORIGINAL_TOKENIZATION_NAMES if not hasattr(tokenization, name)]
    assert not missing


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
