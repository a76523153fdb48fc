"""The weight formats behind one interface (`checkpoints.formats`): each names every encoder
weight, its names are the ones its files hold, and a new format is one class and one
registration, which conversion then reads and writes like the project's own."""

import os
import re

import numpy as np
import pytest

import modeling
from bert_realformer import storage
from bert_realformer.checkpoints import conversion, formats
from bert_realformer.checkpoints.config_files import read_config, write_config
from bert_realformer.checkpoints.formats import WeightFormat, Weights, register
from bert_realformer.checkpoints.tf1 import checkpoint_keys
from bert_realformer.checkpoints.training_states import write_training_state

CONFIG = modeling.BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)


def _encoder_values(seed=0):
    model = modeling.BertModel(CONFIG)
    names = modeling.tf1_variable_map(model)
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(tuple(variable.shape)).astype("float32") for name, variable in names.items()}


def test_the_project_formats_are_registered_and_each_names_every_encoder_weight():
    assert {"hf", "kerashub", "ours", "tf1"} <= set(formats.known())  # (and this test's own)
    encoder = set(modeling.tf1_variable_map(modeling.BertModel(CONFIG)))
    for name in ("hf", "ours", "tf1"):  # (kerashub's names need keras-hub: its conversion tests cover it)
        names = formats.get(name).names(CONFIG)
        assert set(names) == encoder and len(set(names.values())) == len(encoder), name
    with pytest.raises(Exception, match="unknown weight format 'onnx'; expected one of hf, kerashub, "):
        formats.get("onnx")


def test_each_format_names_what_its_files_hold(tmp_path):
    values = _encoder_values()
    prefix = write_training_state(values, str(tmp_path / "ours"))
    ours = formats.get("ours").names(CONFIG)
    assert set(ours.values()) <= checkpoint_keys(prefix)
    weights = Weights(CONFIG, values)
    formats.get("hf").write(str(tmp_path / "hf"), weights, formats.WriteOptions())
    from safetensors.numpy import load
    stored = load((tmp_path / "hf" / "model.safetensors").read_bytes())
    hf = formats.get("hf").names(CONFIG)
    assert set(hf.values()) == set(stored)
    transposed = {"bert/encoder/layer_1/intermediate/dense/kernel"}  # ([in, out] in TF1, [out, in] in PyTorch)
    for tf1_name in transposed:
        np.testing.assert_array_equal(stored[hf[tf1_name]], values[tf1_name].T)


class NpzFormat(WeightFormat):
    """A format of this test's own: the weights in one .npz under their TF1 names, the config beside."""
    name = "npz-for-test"

    def read(self, path, options):
        stored = np.load(os.path.join(path, "weights.npz"))
        config = read_config(os.path.join(path, "bert_config.json"))
        return Weights(config, {name.replace("|", "/"): stored[name] for name in stored.files})

    def write(self, directory, weights, options):
        storage.makedirs(directory)
        np.savez(os.path.join(directory, "weights.npz"), **{k.replace("/", "|"): v for k, v in weights.values.items()})
        write_config(weights.config, os.path.join(directory, "bert_config.json"))
        return ["weights.npz", "bert_config.json"]

    def names(self, config):
        return {name: name.replace("/", "|") for name in modeling.tf1_variable_map(modeling.BertModel(config))}


def test_a_new_format_is_one_class_and_one_registration(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))  # (this test's registration ends with it)
    assert register(NpzFormat) is NpzFormat
    values = _encoder_values(seed=1)
    conversion.write("tf1", str(tmp_path / "tf1"), Weights(CONFIG, values))
    weights = conversion.read("tf1", str(tmp_path / "tf1" / "bert_model.ckpt"))
    assert conversion.write("npz-for-test", str(tmp_path / "npz"), weights) == ["weights.npz", "bert_config.json"]
    back = conversion.read("npz-for-test", str(tmp_path / "npz"))
    assert back.config == CONFIG and sorted(back.values) == sorted(values)
    for name, value in values.items():
        np.testing.assert_array_equal(back.values[name], value)
    with pytest.raises(ValueError, match="'tf1' is registered already"):
        register(type("Other", (NpzFormat,), {"name": "tf1"}))


def test_damaged_weight_files_are_one_line_naming_them(tmp_path):
    """A truncated or missing model.safetensors, and a KerasHub preset without its
    model.weights.h5 or with it truncated: from_pretrained's reader raises one InputError naming
    the file, and the converter ends in that line with status 2."""
    from helpers.conversions import convert

    from bert_realformer.checkpoints.pretrained import read_pretrained
    from bert_realformer.errors import InputError
    weights = Weights(CONFIG, _encoder_values())
    formats.get("hf").write(str(tmp_path / "hf"), weights, formats.WriteOptions())
    safetensors = tmp_path / "hf" / "model.safetensors"
    safetensors.write_bytes(safetensors.read_bytes()[:200])
    message = (rf"{safetensors}: not a readable safetensors file \(.+\); truncated\? Copy it again from where it "
               "came from")
    with pytest.raises(InputError, match=f"^{message}$"):
        read_pretrained(str(tmp_path / "hf"))
    refused = convert("--to=tf1", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'out'}")
    assert refused.returncode == 2
    assert re.fullmatch(f"error: {message}", refused.stderr.strip().splitlines()[-1])
    safetensors.unlink()
    with pytest.raises(InputError, match=rf"^{tmp_path}/hf: holds config.json but no model.safetensors \(a Hugging "
                                         r"Face model directory holds both\), and no TF1 checkpoint$"):
        read_pretrained(str(tmp_path / "hf"))

    pytest.importorskip("keras_hub")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                             [f"w{i}" for i in range(35)]))
    preset = tmp_path / "preset"
    formats.get("kerashub").write(str(preset), Weights(CONFIG, weights.values, str(vocab)), formats.WriteOptions())
    h5 = preset / "model.weights.h5"
    whole = h5.read_bytes()
    h5.unlink()
    with pytest.raises(InputError, match=rf"^{h5}: missing \(a KerasHub preset directory holds config.json and "
                                         r"model.weights.h5\)$"):
        read_pretrained(str(preset))
    h5.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(InputError, match=rf"^{preset}: its weights \(model.weights.h5, or the task's\) cannot be read "
                                         r"\(.+\); truncated\? Copy the preset again$"):
        read_pretrained(str(preset))
