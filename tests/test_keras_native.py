"""The models as Keras models: every layer and model rebuilt from its config, `.keras` files and
`export()` read back in a fresh process for every model and variant, and one loader for every
weight format (`bert_realformer.from_pretrained`)."""

import json
import logging
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import modeling
from bert_realformer import from_pretrained  # (the one loader, at the package's top)
from bert_realformer.checkpoints import CheckpointError, conversion
from bert_realformer.checkpoints.training_states import load_weights, resolve
from bert_realformer.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
ROUND_TRIP = os.path.join(ROOT, "tests", "helpers", "keras_round_trip.py")
CONFIG = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=16, residual_attention="sum")


def _layers():
    """One instance of every layer and model class `modeling` exports."""
    return [modeling.BertModel(CONFIG), modeling.BertEmbeddings(CONFIG), modeling.TransformerEncoder(CONFIG),
            modeling.TransformerBlock(CONFIG, layer_index=1), modeling.AttentionLayer(2, 8, 0.1, 0.02, "sum", 1),
            modeling.LayerNorm(epsilon=1e-6), modeling.Dropout(0.2), modeling.MaskedLMHead(CONFIG),
            modeling.NextSentenceHead(CONFIG), modeling.ClassifierHead(16, 5, dropout_prob=0.3),
            modeling.TokenClassifierHead(16, 4, crf=True), modeling.ChoiceHead(16), modeling.SpanHead(16),
            modeling.BertPretrainer(CONFIG, next_sentence=False), modeling.BertClassifier(CONFIG, 7),
            modeling.BertSpanLabeler(CONFIG), modeling.BertTokenClassifier(CONFIG, 3, crf=True),
            modeling.BertMultipleChoice(CONFIG)]


def test_every_layer_and_model_is_registered_and_rebuilds_from_its_config():
    """Each serialises under its registered name and deserialises, with no custom objects, into
    the same class with the same config: what a `.keras` file holding it needs."""
    exported = {name for name in modeling.__all__ if isinstance(getattr(modeling, name), type)
                and issubclass(getattr(modeling, name), keras.layers.Layer)}
    layers = _layers()
    assert {type(layer).__name__ for layer in layers} == exported
    for layer in layers:
        serialised = keras.saving.serialize_keras_object(layer)
        assert serialised["registered_name"] == f"bert_realformer>{type(layer).__name__}"
        rebuilt = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialised)))
        assert type(rebuilt) is type(layer) and rebuilt.get_config() == layer.get_config(), type(layer)


@pytest.mark.slow
def test_keras_files_and_exports_read_back_in_a_fresh_process_for_every_model_and_variant(tmp_path):
    """Saved in one process, loaded in another that imports `modeling` alone (no
    `custom_objects`): the `.keras` file gives the same outputs (a classifier after `fit` too, its
    optimizer's step count kept), and `export()` without a signature serves them from int32
    inputs whose batch and length are free. The encoder in every variant, every model in Pre-LN
    RealFormer-mean."""
    for mode in ("save", "load"):
        done = subprocess.run([sys.executable, ROUND_TRIP, mode, str(tmp_path)], capture_output=True, text=True,
                              timeout=900, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(found) == 3 + 7 + 1
    for name, result in found.items():
        assert result["keys"] and result["keras"] == 0.0, name
        if name.startswith("classifier-fitted"):
            assert result["optimizer_iterations"] == 3, name
            continue
        assert result["export_keys"] and result["export"] < 1e-5, name
        assert all(dtype == "int32" and all(size is None for size in shape)
                   for dtype, shape in result["export_inputs"].values()), name
    assert {result["variant"] for result in found.values()} == {"post-LN", "pre-LN", "RealFormer",
                                                                 "pre-LN RealFormer-mean"}
    assert set(found["encoder-post-LN"]["export_inputs"]) == {"input_ids", "input_mask", "token_type_ids"}
    assert set(found["multiple_choice-RealFormer-mean-pre-LN"]["export_inputs"]) >= {"choice_mask"}


@pytest.fixture(scope="module")
def formats_dir(tmp_path_factory):
    """The tiny TF1 fixture converted to every other format: {format: its path}."""
    root = tmp_path_factory.mktemp("formats")
    weights = conversion.read("tf1", TINY)
    paths = {"tf1": TINY}
    for kind in ("hf", "kerashub", "ours"):
        path = root / kind
        path.mkdir()
        conversion.write(kind, str(path), weights, force=True)  # (KerasHub's masked LM has no NSP head)
        paths[kind] = str(path)
    return paths


def test_from_pretrained_reads_every_format_into_the_same_weights(formats_dir):
    """A TF1 release's directory, a Hugging Face directory, a KerasHub preset and one of our
    training states each give the encoder the weights of the TF1 checkpoint."""
    truth = conversion.read("tf1", TINY).values
    for kind, path in formats_dir.items():
        encoder = from_pretrained(path)
        assert type(encoder) is modeling.BertModel, kind
        loaded = {name: np.asarray(value) for name, value in modeling.tf1_variable_map(encoder).items()}
        assert sorted(loaded) == sorted(name for name in truth if name.startswith("bert/")), kind
        for name, value in loaded.items():
            np.testing.assert_array_equal(value, truth[name], err_msg=f"{kind}: {name}")


def test_from_pretrained_builds_the_task_model_and_says_what_it_lacks(formats_dir, caplog):
    with caplog.at_level(logging.INFO, logger="bert_realformer.checkpoints.pretrained"):
        classifier = from_pretrained(formats_dir["hf"], task="classifier", num_labels=3, residual_attention="sum")
    assert classifier.num_labels == 3 and classifier.config.residual_attention == "sum"
    warned = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warned) == 1 and "freshly initialised (not in it): output_weights, output_bias" in warned[0].message
    pretrainer = from_pretrained(formats_dir["tf1"], task="pretrainer")
    assert pretrainer.next_sentence is not None  # (the release's NSP head, found in its weights)
    with pytest.raises(CheckpointError, match="freshly initialised"):
        from_pretrained(formats_dir["tf1"], task="classifier", num_labels=2, strict=True)
    with pytest.raises(InputError, match="num_labels is needed"):
        from_pretrained(formats_dir["tf1"], task="classifier")
    with pytest.raises(InputError, match="task='ranker': expected one of"):
        from_pretrained(formats_dir["tf1"], task="ranker")
    with pytest.raises(InputError, match="no such file or directory"):
        from_pretrained(os.path.join(formats_dir["hf"], "missing"))


def test_init_checkpoint_takes_a_hugging_face_directory_and_a_kerashub_preset(formats_dir):
    """What every script does with --init_checkpoint (`training_states.resolve`, `load_weights`),
    and --bert_config_file naming the directory's own config.json."""
    from bert_realformer.checkpoints.config_files import read_config
    truth = conversion.read("tf1", TINY)
    for kind in ("hf", "kerashub"):
        checkpoint = resolve(formats_dir[kind])
        assert checkpoint.weight_format == kind and checkpoint.kind in ("Hugging Face model", "KerasHub preset")
        config = read_config(os.path.join(formats_dir[kind], "config.json"))
        unheld = {"initializer_range"} if kind == "kerashub" else set()  # (KerasHub's config holds no such key)
        assert ({key: value for key, value in config.to_dict().items() if key not in unheld}
                == {key: value for key, value in truth.config.to_dict().items() if key not in unheld}), kind
        model = modeling.BertClassifier(config, 2)
        report = load_weights(model, checkpoint)
        assert report.missing == ["output_weights", "output_bias"], kind
        np.testing.assert_array_equal(np.asarray(model.bert.embeddings.word_embeddings),
                                      truth.values["bert/embeddings/word_embeddings"])


@pytest.mark.slow
def test_a_run_from_a_hugging_face_directory_is_the_run_from_its_tf1_release_and_its_best_loads(
        formats_dir, tmp_path):
    """run_classifier.py with --init_checkpoint (and --bert_config_file, --vocab_file) naming the
    Hugging Face conversion of a TF1 release ends with the eval results of the same run from the
    release; `from_pretrained(OUTPUT_DIR/best)` then predicts what the run wrote."""
    from helpers.in_process import completed_in_process

    from tokenization import FullTokenizer
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(3)
    words = ["eat", "drink", "sleep", "dream", "up", "down", "left", "right"]
    for split, count in (("train", 48), ("dev", 16), ("test", 8)):
        rows = [" ".join(rng.choice(words, 5)) for _ in range(count)]
        lines = ["sentence\tlabel"] + [f"{row}\t{int('eat' in row)}" for row in rows] if split != "test" else \
            ["index\tsentence"] + [f"{i}\t{row}" for i, row in enumerate(rows)]
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    results = {}
    for kind, config, vocab in (("tf1", f"{TINY}/bert_config.json", f"{TINY}/vocab.txt"),
                                ("hf", f"{formats_dir['hf']}/config.json", f"{formats_dir['hf']}/vocab.txt")):
        out = tmp_path / kind
        done = completed_in_process(
            "run_classifier.py", "--task_name=sst-2", f"--data_dir={data}", f"--vocab_file={vocab}",
            f"--bert_config_file={config}", f"--init_checkpoint={formats_dir[kind]}", f"--output_dir={out}",
            "--do_train", "--do_eval", "--do_predict", "--max_seq_length=16", "--train_batch_size=8",
            "--num_train_epochs=1", "--eval_every_steps=3", "--learning_rate=1e-3", "--seed=4")
        assert done.returncode == 0, done.stderr[-3000:]
        results[kind] = (out / "eval_results.txt").read_text()
    assert results["hf"] == results["tf1"]
    best = from_pretrained(str(tmp_path / "hf" / "best"), task="classifier")
    tokenizer = FullTokenizer(f"{TINY}/vocab.txt")
    texts = [line.split("\t")[1] for line in (data / "test.tsv").read_text().splitlines()[1:]]
    ids = np.zeros((len(texts), 16), np.int32)
    for row, text in enumerate(texts):
        tokens = ["[CLS]", *tokenizer.tokenize(text)[:14], "[SEP]"]
        ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    logits = best({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                   "token_type_ids": np.zeros_like(ids)}, training=False)
    written = np.loadtxt(tmp_path / "hf" / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras.ops.softmax(logits)), written, atol=1e-5)
    shutil.rmtree(tmp_path / "tf1")
