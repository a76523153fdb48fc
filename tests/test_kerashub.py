"""KerasHub presets both ways: a classifier converted with `--to=kerashub` is a
`BertTextClassifier` preset whose logits on raw English text (tokenized by KerasHub's own
preprocessor) equal ours; `BertBackbone.from_preset` loads it; `--from=kerashub` gives the
weights back bit for bit; what KerasHub cannot express stops in one line."""

import os
import shutil

import keras
import numpy as np
import pytest
from helpers.conversions import convert, refused_then_forced

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config, write_config

pytestmark = pytest.mark.slow  # the conversion script in subprocesses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
VOCAB = os.path.join(DATA, "tokenization", "vocab_en_uncased.txt")  # the released uncased BERT vocabulary
SENTENCES = ["A man is playing a guitar.", "Someone plays an acoustic guitar on stage!",
             "The stock market fell sharply on Monday, analysts said.", "Hi"]
CONFIG = modeling.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)


def _saved(model, directory, config=CONFIG):
    model.build()
    checkpoints.save_tf1_checkpoint(model, str(directory / "bert_model.ckpt"))
    write_config(config, str(directory / "bert_config.json"))
    shutil.copy(VOCAB, directory / "vocab.txt")
    return {name: v.numpy() for name, v in modeling.tf1_variable_map(model).items()}


def _our_logits(model, sentences, length):
    from bert_realformer.tasks.sequences import pack
    from tokenization import FullTokenizer
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    ids = np.zeros((len(sentences), length), "int32")
    for row, text in enumerate(sentences):
        sequence, _ = pack(tokenizer.tokenize_to_ids(text), None, length, tokenizer.vocab["[CLS]"],
                           tokenizer.vocab["[SEP]"])
        ids[row, :len(sequence)] = sequence
    return np.asarray(model({"input_ids": ids, "input_mask": (ids > 0).astype("int32"),
                             "token_type_ids": np.zeros_like(ids)}))


def test_a_classifier_to_a_kerashub_preset_and_back(tmp_path):
    import keras_hub
    keras.utils.set_random_seed(3)
    model = modeling.BertClassifier(CONFIG, num_labels=3)
    source = tmp_path / "classifier"
    saved = _saved(model, source)
    result = convert("--from=tf1", "--to=kerashub", f"--input={source}/bert_model.ckpt", "--max_seq_length=32",
                     f"--output={tmp_path}/preset")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "a KerasHub BertTextClassifier preset" in result.stdout
    assert ("note: KerasHub's tokenizer lower-cases by NFKC case folding: 117 tokens of the vocabulary never "
            "come out of it (！ （ ） ， － ． ／ ： ...)") in result.stderr

    task = keras_hub.models.BertTextClassifier.from_preset(str(tmp_path / "preset"))
    theirs = np.asarray(task.predict(SENTENCES, verbose=0))  # raw text through KerasHub's preprocessor
    np.testing.assert_allclose(theirs, _our_logits(model, SENTENCES, 32), atol=1e-4)
    backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "preset"))
    assert backbone.num_layers == 2 and backbone.hidden_dim == 32

    back = convert("--from=kerashub", "--to=tf1", f"--input={tmp_path}/preset", f"--output={tmp_path}/back")
    assert back.returncode == 0, back.stderr[-3000:]
    again = checkpoints.read_tf1_checkpoint(str(tmp_path / "back"))
    assert again.keys() == saved.keys()
    for name, value in saved.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)
    assert read_config(str(tmp_path / "back" / "bert_config.json")) == CONFIG


def test_the_tokens_kerashub_folds_away_never_come_out_of_its_tokenizer():
    """Each token `unreachable_tokens` names is one KerasHub's own tokenizer never gives for it
    (，-> ,), while the original's gives it; tokens it does not name come out as themselves."""
    import keras_hub

    from bert_realformer.checkpoints.kerashub import unreachable_tokens
    from tokenization import FullTokenizer
    vocab_file = os.path.join(DATA, "tokenization", "vocab_zh.txt")
    unreachable = unreachable_tokens(vocab_file)
    assert {"，", "！", "１"} <= set(unreachable)
    theirs, ours = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=True), FullTokenizer(vocab_file)
    for word in unreachable:
        if word in ours.vocab:  # (a `##` piece's word may not be a token of its own)
            assert ours.vocab[word] not in np.asarray(theirs(word)).tolist(), word
    for word in ("，", "！", "１"):
        assert ours.tokenize_to_ids(word) == [ours.vocab[word]], word
    for word in ("中", ",", "!", "1", "hello"):
        assert np.asarray(theirs(word)).tolist() == ours.tokenize_to_ids(word) == [ours.vocab[word]], word


def test_pretraining_heads_keep_the_mlm_head_and_refuse_to_drop_nsp_silently(tmp_path):
    keras.utils.set_random_seed(4)
    source = tmp_path / "pretrainer"
    saved = _saved(modeling.BertPretrainer(CONFIG), source)
    refused_then_forced(
        ["--from=tf1", "--to=kerashub", f"--input={source}/bert_model.ckpt", f"--output={tmp_path}/p"],
        "error: 2 weights have no place in KerasHub's BertMaskedLM and would be dropped: "
        "cls/seq_relationship/output_bias, cls/seq_relationship/output_weights; pass --force to write without them")
    back = convert("--from=kerashub", "--to=tf1", f"--input={tmp_path}/p", f"--output={tmp_path}/back")
    assert back.returncode == 0, back.stderr[-3000:]
    again = checkpoints.read_tf1_checkpoint(str(tmp_path / "back"))
    assert set(saved) - set(again) == {"cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"}
    for name, value in again.items():
        np.testing.assert_array_equal(value, saved[name], err_msg=name)


def test_variants_kerashub_cannot_express_are_one_line(tmp_path):
    source = tmp_path / "realformer"
    realformer = CONFIG.replace(residual_attention="sum")
    _saved(modeling.BertModel(realformer), source, realformer)
    result = convert("--from=tf1", "--to=kerashub", f"--input={source}/bert_model.ckpt", f"--output={tmp_path}/p")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: a post-LN model with residual_attention='sum' cannot be expressed by KerasHub's BertBackbone "
        "(post-LN BERT only)")
    assert not os.path.exists(tmp_path / "p")
