import json

import pytest

from bert_realformer.checkpoints.config_files import read_config, write_config
from bert_realformer.errors import InputError
from modeling import BertConfig, ConfigError

BASE = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 37}


def _write(tmp_path, obj, name="bert_config.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def test_defaults_are_the_original_ones():
    config = BertConfig(vocab_size=30522)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size, config.hidden_act, config.hidden_dropout_prob,
            config.attention_probs_dropout_prob, config.max_position_embeddings,
            config.type_vocab_size, config.initializer_range) == (
        768, 12, 12, 3072, "gelu", 0.1, 0.1, 512, 16, 0.02)
    assert (config.layer_norm_type, config.residual_attention) == ("post", "none")


def test_repo_root_config_is_bert_base_realformer():
    config = read_config("bert_config.json")
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (30522, 768, 12)
    assert config.residual_attention == "sum"


def test_unknown_keys_are_kept_and_written_back(tmp_path):
    released = {**BASE, "directionality": "bidi", "pooler_fc_size": 768, "pooler_type": "first_token_transform"}
    config = read_config(_write(tmp_path, released))
    assert config.extra_keys == {"directionality": "bidi", "pooler_fc_size": 768,
                                 "pooler_type": "first_token_transform"}
    out = str(tmp_path / "out.json")
    write_config(config, out)
    written = json.loads(open(out).read())
    for key, value in released.items():
        assert written[key] == value
    assert read_config(out) == config


@pytest.mark.parametrize("flag,mode", [(True, "mean"), (False, "sum")])
def test_official_realformer_use_running_mean(tmp_path, flag, mode):
    config = read_config(_write(tmp_path, {**BASE, "use_running_mean": flag}))
    assert config.residual_attention == mode
    assert "use_running_mean" not in config.extra_keys
    # Written back with both keys, so the official code reads the same mode.
    assert config.to_dict()["use_running_mean"] is flag
    assert config.to_dict()["residual_attention"] == mode


def test_plain_bert_config_does_not_write_use_running_mean():
    assert "use_running_mean" not in BertConfig(**BASE).to_dict()


@pytest.mark.parametrize("change,expected", [
    ({"hidden_size": 30}, "hidden_size (30) must be divisible by num_attention_heads (4)"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer, got 0"),
    ({"vocab_size": -5}, "vocab_size must be a positive integer, got -5"),
    ({"intermediate_size": 3.5}, "intermediate_size must be a positive integer, got 3.5"),
    ({"hidden_act": "gelu_fast"}, "unknown hidden_act 'gelu_fast'"),
    ({"layer_norm_type": "sandwich"}, "unknown layer_norm_type 'sandwich'; expected one of post, pre"),
    ({"residual_attention": "max"}, "unknown residual_attention 'max'; expected one of none, sum, mean"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be a number in [0, 1), got 1.5"),
    ({"initializer_range": 0}, "initializer_range must be a positive number, got 0"),
    ({"use_running_mean": True, "residual_attention": "sum"},
     "use_running_mean=true contradicts residual_attention='sum'"),
    ({"vocab_size": None}, "vocab_size is required"),
    ({"position_offset": 512}, "position_offset must be an integer in [0, max_position_embeddings=512), got 512"),
    ({"position_offset": -1}, "position_offset must be an integer in [0, max_position_embeddings=512), got -1"),
    ({"layer_norm_eps": 0}, "layer_norm_eps must be a number in (0, 1), got 0"),
    ({"type_vocab_size": -1}, "type_vocab_size must be a non-negative integer (0: no token types), got -1"),
    ({"pooler_activation": "gelu"}, "unknown pooler_activation 'gelu'; expected one of tanh, relu"),
])
def test_bad_config_gives_one_line_error_naming_file_and_key(tmp_path, change, expected):
    path = _write(tmp_path, {**BASE, **change})
    with pytest.raises(ConfigError) as info:
        read_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(path + ": ")
    assert expected in message


def test_invalid_json_and_missing_file(tmp_path):
    path = _write(tmp_path, '{"vocab_size": 10,\n "hidden_size": }')
    with pytest.raises(ConfigError, match=r"invalid JSON at line 2 column"):
        read_config(path)
    with pytest.raises(ConfigError, match=r"nope.json: cannot read config"):
        read_config(str(tmp_path / "nope.json"))


def test_the_family_keys_are_written_only_where_they_are_not_berts(tmp_path):
    """A BERT config stays the file the original writes; RoBERTa's offset and epsilon survive a
    round trip, and a script's max_seq_length is checked against the positions past the offset."""
    from bert_realformer.errors import InputError
    from bert_realformer.training.setup import load_config
    assert not {"position_offset", "layer_norm_eps", "pooler_activation"} & BertConfig(**BASE).to_dict().keys()
    assert BertConfig(**BASE, pooler_activation="relu").to_dict()["pooler_activation"] == "relu"
    roberta = BertConfig(**BASE, max_position_embeddings=40, position_offset=2, layer_norm_eps=1e-5)
    path = tmp_path / "bert_config.json"
    write_config(roberta, str(path))
    again = read_config(str(path))
    assert (again.position_offset, again.layer_norm_eps, again.max_sequence_length) == (2, 1e-5, 38)
    assert load_config(str(path), 38).position_offset == 2
    with pytest.raises(InputError, match=r"^max_seq_length=39 exceeds max_position_embeddings 40 less its "
                                         r"position_offset 2 of .*bert_config.json$"):
        load_config(str(path), 39)


def test_replace_validates():
    config = BertConfig(**BASE)
    assert config.replace(layer_norm_type="pre").layer_norm_type == "pre"
    with pytest.raises(ConfigError):
        config.replace(residual_attention="bogus")


def test_hidden_act_is_case_insensitive_as_the_original(tmp_path):
    """The original lower-cases the name before looking it up: "GELU" and "Relu" are valid."""
    import numpy as np
    from keras import ops

    from modeling import gelu, get_activation
    config = read_config(_write(tmp_path, {**BASE, "hidden_act": "GELU"}))
    assert get_activation(config.hidden_act) is gelu
    x = np.array([-1.5, 0.0, 2.0], np.float32)
    np.testing.assert_array_equal(ops.convert_to_numpy(get_activation("Relu")(x)), [0.0, 0.0, 2.0])
    with pytest.raises(ConfigError, match="unknown hidden_act 'Gelu2'"):
        read_config(_write(tmp_path, {**BASE, "hidden_act": "Gelu2"}))


def test_segment_ids_key_is_the_token_type_ids_input():
    """The TFRecord name for the segment ids feeds the model; before, it was silently ignored."""
    import numpy as np

    from modeling import BertModel
    config = BertConfig(**{**BASE, "type_vocab_size": 2})
    model = BertModel(config)
    ids = np.array([[5, 6, 7, 8]], np.int32)
    types = np.array([[0, 0, 1, 1]], np.int32)
    by_name = model({"input_ids": ids, "segment_ids": types})["sequence_output"]
    by_tf_name = model({"input_ids": ids, "token_type_ids": types})["sequence_output"]
    zeros = model({"input_ids": ids})["sequence_output"]
    np.testing.assert_allclose(np.asarray(by_name), np.asarray(by_tf_name), rtol=0, atol=0)
    assert np.abs(np.asarray(by_name) - np.asarray(zeros)).max() > 1e-3
    with pytest.raises(ValueError, match="both token_type_ids and segment_ids"):
        model({"input_ids": ids, "segment_ids": types, "token_type_ids": types})


def test_the_config_reads_from_text_and_from_a_file_as_the_original(tmp_path):
    """`from_json_string` and the original's `from_json_file` (a local file and one on TensorFlow's
    ram:// filesystem, the stand-in for gs://) give what `read_config` gives; errors name the file."""
    import tensorflow as tf
    text = json.dumps({**BASE, "residual_attention": "mean"})
    path = _write(tmp_path, json.loads(text))
    assert BertConfig.from_json_string(text, source="mine") == read_config(path)
    assert BertConfig.from_json_file(path) == read_config(path)
    with tf.io.gfile.GFile("ram://configs/bert_config.json", "w") as remote:
        remote.write(text)
    assert BertConfig.from_json_file("ram://configs/bert_config.json") == read_config(path)
    with pytest.raises(ConfigError, match=r"^mine: invalid JSON at line 1 column 2"):
        BertConfig.from_json_string("{]", source="mine")
    with pytest.raises(ConfigError, match=r"^mine: vocab_size is required"):  # every size checked
        BertConfig.from_json_string(json.dumps({"hidden_size": 8, "num_attention_heads": 2}), source="mine")
    (tmp_path / "broken.json").write_text("{]")
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/broken.json: invalid JSON at line 1 column 2"):
        BertConfig.from_json_file(str(tmp_path / "broken.json"))
    with pytest.raises(InputError, match=rf"^{tmp_path}/none.json: "):
        BertConfig.from_json_file(str(tmp_path / "none.json"))
