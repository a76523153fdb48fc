"""Every task head to Hugging Face and back: each of our models (the tiny original-BERT encoder
with its head's weights drawn at random, biases too) converted with `--to=hf`, loaded by
transformers on PyTorch in a fresh process, gives our outputs to 1e-4; `--from=hf` gives back
the same weights bit for bit (and a classifier's labels); the tokenizer files make
`AutoTokenizer` give our ids, cased and uncased."""

import json
import os
import shutil
import sys

import numpy as np
import pytest
from helpers import script_processes
from helpers.conversions import convert, refused_then_forced
from helpers.transformers_classifier import transformers_probabilities

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints.config_files import read_config

pytestmark = pytest.mark.slow  # scripts and transformers in subprocesses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSTLN = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
ORACLE = os.path.join(ROOT, "tests", "helpers", "hf_heads_oracle.py")
LABELS = ["negative", "neutral", "positive"]


def _models(config):
    return {"pretraining": modeling.BertPretrainer(config),
            "masked_lm": modeling.BertPretrainer(config, next_sentence=False),
            "classifier": modeling.BertClassifier(config, 3),
            "regression": modeling.BertClassifier(config, 1), "span": modeling.BertSpanLabeler(config),
            "tokens": modeling.BertTokenClassifier(config, 5), "choice": modeling.BertMultipleChoice(config)}


def _with_random_heads(model, rng):
    """The fixture encoder (and MLM/NSP heads where it has them); every other weight random."""
    checkpoints.load_tf1_checkpoint(model, os.path.join(POSTLN, "bert_model.ckpt"))
    pretrained = checkpoints.read_tf1_checkpoint(POSTLN)
    for name, variable in modeling.tf1_variable_map(model).items():
        if name not in pretrained:
            variable.assign(rng.normal(0.0, 0.5, size=tuple(variable.shape)).astype("float32"))
    return model


def _our_outputs(head, model, io):
    inputs = {"input_ids": io["input_ids"], "input_mask": io["input_mask"], "token_type_ids": io["token_type_ids"]}
    if head in ("pretraining", "masked_lm"):
        out = model({**inputs, "masked_lm_positions": io["masked_lm_positions"]})
        if head == "masked_lm":  # MLM-only pretraining (--no_nsp): no NSP head
            return {"mlm": np.asarray(out["masked_lm_log_probs"])}
        return {"mlm": np.asarray(out["masked_lm_log_probs"]), "nsp": np.asarray(out["next_sentence_log_probs"])}
    if head == "span":
        start, end = model(inputs)
        return {"start": np.asarray(start), "end": np.asarray(end)}
    if head == "tokens":
        positions = np.tile(np.arange(io["input_ids"].shape[1], dtype="int32"), (len(io["input_ids"]), 1))
        return {"logits": np.asarray(model({**inputs, "word_positions": positions}))}
    if head == "choice":
        pair = {k: np.stack([v, v[::-1]], axis=1) for k, v in inputs.items()}
        return {"logits": np.asarray(model({**pair, "choice_mask": np.ones((len(io["input_ids"]), 2), "int32")}))}
    return {"logits": np.asarray(model(inputs))}


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_every_head_to_transformers_and_back(tmp_path):
    config = read_config(os.path.join(POSTLN, "bert_config.json"))
    io = dict(np.load(os.path.join(POSTLN, "io.npz")))
    rng = np.random.default_rng(0)
    ours, dirs, saved = {}, {}, {}
    for head, model in _models(config).items():
        model = _with_random_heads(model, rng)
        ours[head] = _our_outputs(head, model, io)
        source = tmp_path / head
        saved[head] = {name: v.numpy() for name, v in modeling.tf1_variable_map(model).items()}
        checkpoints.save_tf1_checkpoint(model, str(source / "bert_model.ckpt"))
        for name in ("bert_config.json", "vocab.txt"):
            shutil.copy(os.path.join(POSTLN, name), source / name)
        if head == "classifier":
            (source / "label_list.txt").write_text("".join(f"{label}\n" for label in LABELS))
        result = convert("--from=tf1", "--to=hf", f"--input={source}/bert_model.ckpt", f"--output={tmp_path}/hf_{head}")
        assert result.returncode == 0, (head, result.stderr[-2000:])
        dirs[head] = str(tmp_path / f"hf_{head}")

    request = {"dirs": dirs, "inputs": {"input_ids": io["input_ids"].tolist(),
                                        "attention_mask": io["input_mask"].tolist(),
                                        "token_type_ids": io["token_type_ids"].tolist()}}
    oracle = script_processes.run([sys.executable, ORACLE], input=json.dumps(request), capture_output=True, text=True,
                            timeout=600)
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    theirs = json.loads(oracle.stdout.strip().splitlines()[-1])

    expected_classes = {"pretraining": "BertForPreTraining", "masked_lm": "BertForMaskedLM",
                        "classifier": "BertForSequenceClassification",
                        "regression": "BertForSequenceClassification", "span": "BertForQuestionAnswering",
                        "tokens": "BertForTokenClassification", "choice": "BertForMultipleChoice"}
    for head, architecture in expected_classes.items():
        assert theirs[head]["architectures"] == [architecture], head
    # MLM/NSP: their logits, log-softmaxed, at the masked positions (MLM-only: BertForMaskedLM's).
    for head in ("pretraining", "masked_lm"):
        mlm = _log_softmax(np.array(theirs[head]["mlm"]))
        rows = np.take_along_axis(mlm, io["masked_lm_positions"][..., None].astype(int),
                                  axis=1).reshape(-1, mlm.shape[-1])
        np.testing.assert_allclose(rows, ours[head]["mlm"].reshape(rows.shape), atol=1e-4, err_msg=head)
    assert not any(name.startswith("cls/seq_relationship") for name in saved["masked_lm"])
    np.testing.assert_allclose(_log_softmax(np.array(theirs["pretraining"]["nsp"])), ours["pretraining"]["nsp"],
                               atol=1e-4)
    # The classifier's probabilities, its labels and problem types.
    probabilities = np.exp(_log_softmax(np.array(theirs["classifier"]["logits"])))
    np.testing.assert_allclose(probabilities, np.exp(_log_softmax(ours["classifier"]["logits"])), atol=1e-4)
    assert theirs["classifier"]["id2label"] == {str(i): label for i, label in enumerate(LABELS)}
    assert theirs["classifier"]["problem_type"] == "single_label_classification"
    assert theirs["regression"]["problem_type"] == "regression"
    for head, keys in (("regression", ("logits",)), ("span", ("start", "end")), ("tokens", ("logits",)),
                       ("choice", ("logits",))):
        for key in keys:
            np.testing.assert_allclose(np.array(theirs[head][key]), ours[head][key], atol=1e-4, err_msg=f"{head} {key}")

    # Back from Hugging Face: the same weights, bit for bit, and the labels.
    for head in expected_classes:
        back = convert("--from=hf", "--to=tf1", f"--input={dirs[head]}", f"--output={tmp_path}/back_{head}")
        assert back.returncode == 0, (head, back.stderr[-2000:])
        again = checkpoints.read_tf1_checkpoint(str(tmp_path / f"back_{head}"))
        assert again.keys() == saved[head].keys(), head
        for name, value in saved[head].items():
            np.testing.assert_array_equal(again[name], value, err_msg=f"{head} {name}")
    assert (tmp_path / "back_classifier" / "label_list.txt").read_text().splitlines() == LABELS


def test_a_crf_has_no_hugging_face_place_refused_unless_forced(tmp_path):
    config = read_config(os.path.join(POSTLN, "bert_config.json"))
    model = _with_random_heads(modeling.BertTokenClassifier(config, 5, crf=True), np.random.default_rng(1))
    checkpoints.save_tf1_checkpoint(model, str(tmp_path / "crf" / "bert_model.ckpt"))
    shutil.copy(os.path.join(POSTLN, "bert_config.json"), tmp_path / "crf" / "bert_config.json")
    forced = refused_then_forced(
        ["--from=tf1", "--to=hf", f"--input={tmp_path}/crf/bert_model.ckpt", f"--output={tmp_path}/hf"],
        "error: 1 weights have no place in Hugging Face's BertForTokenClassification (Hugging Face's token "
        "classification has no CRF) and would be dropped: cls/ner/transitions; pass --force to write without them")
    assert "cls/ner/transitions" in forced.stderr


@pytest.mark.parametrize("cased", [False, True])
def test_auto_tokenizer_gives_our_ids(tmp_path, cased):
    from tokenization import FullTokenizer
    vocab = tmp_path / "vocab.txt"
    if cased:
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello", "World", "world", ",", "!",
                  "caf", "##é", "##e", "naïve", "naive", "北", "京"]
        vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    else:
        shutil.copy(os.path.join(POSTLN, "vocab.txt"), vocab)
    source = tmp_path / "model"
    source.mkdir()
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json"):
        shutil.copy(os.path.join(POSTLN, name), source / name)
    result = convert("--from=tf1", "--to=hf", f"--input={source}/bert_model.ckpt", f"--vocab_file={vocab}",
                     f"--do_lower_case={not cased}", f"--output={tmp_path}/hf")
    assert result.returncode == 0, result.stderr[-2000:]
    # (with a private-use character, which transformers' own BertTokenizer drops where the
    # original reads [UNK], and a word of 150 characters, which it reads as [UNK])
    texts = ["Hello, World! the café", "naïve 北京 hello world", "The a an OF", "hello \ue5e5 world",
             "hello " + "world" * 30]
    # (and saved again by transformers, as a user's fine-tuning leaves it: transformers 5 writes
    # tokenizer.json without vocab.txt)
    code = ("import json, sys, transformers\n"
            f"t = transformers.AutoTokenizer.from_pretrained({str(tmp_path / 'hf')!r})\n"
            f"t.save_pretrained({str(tmp_path / 'saved')!r})\n"
            "x = json.loads(sys.stdin.read())\n"
            "print(json.dumps([t(x[0], x[1])['token_type_ids']]))\n"
            "print(json.dumps([t(text)['input_ids'] for text in x]))\n")
    theirs = script_processes.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                            timeout=300)
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    tokenizer = FullTokenizer(str(vocab), do_lower_case=not cased)
    ours = [[tokenizer.vocab["[CLS]"], *tokenizer.tokenize_to_ids(text), tokenizer.vocab["[SEP]"]] for text in texts]
    assert json.loads(theirs.stdout.strip().splitlines()[-1]) == ours
    # A pair's second text is segment 1, as BERT was trained (sentence-pair classifiers need it).
    assert json.loads(theirs.stdout.strip().splitlines()[-2]) == [[0] * len(ours[0]) + [1] * (len(ours[1]) - 1)]

    # Back to TF1 from that directory: vocab.txt comes from its tokenizer.json, line for line.
    saved = tmp_path / "saved"
    assert not (saved / "vocab.txt").exists()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tmp_path / "hf" / name, saved / name)
    back = convert("--from=hf", "--to=tf1", f"--input={saved}", f"--output={tmp_path}/back")
    assert back.returncode == 0, back.stderr[-2000:]
    assert f"vocab.txt: the WordPiece vocabulary of {saved}/tokenizer.json (no vocab.txt beside it)" in back.stderr
    assert (tmp_path / "back" / "vocab.txt").read_bytes() == vocab.read_bytes()


def test_a_fine_tuned_classifier_run_leaves_for_transformers_with_its_labels(tmp_path):
    """The journey: run_classifier.py fine-tunes (generic data, three named labels), the run
    directory is converted (`--from=ours`: its recorded bert_config.json and label_list.txt), and
    transformers, tokenizing the raw test texts itself, gives the run's test_results.tsv."""
    import random
    rng = random.Random(0)
    words = "the cat sat on a mat dog played in snow old man reads it rained".split()
    data, out = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    rows = {split: [(" ".join(rng.choices(words, k=rng.randint(3, 12))), LABELS[i % 3]) for i in range(n)]
            for split, n in (("train", 24), ("test", 9))}
    for split, part in rows.items():
        (data / f"{split}.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in part))
    trained = script_processes.run(
        [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic", f"--data_dir={data}",
         f"--vocab_file={POSTLN}/vocab.txt", f"--bert_config_file={POSTLN}/bert_config.json",
         f"--init_checkpoint={POSTLN}/bert_model.ckpt", "--max_seq_length=16", "--train_batch_size=8",
         "--num_train_epochs=2", "--learning_rate=1e-3", f"--output_dir={out}", "--do_train", "--do_predict"],
        capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    labels = (out / "label_list.txt").read_text().splitlines()
    assert sorted(labels) == sorted(LABELS)
    result = convert("--from=ours", "--to=hf", f"--input={out}", f"--vocab_file={POSTLN}/vocab.txt",
                     f"--output={tmp_path}/hf")
    assert result.returncode == 0, result.stderr[-3000:]
    probabilities, id2label, _ = transformers_probabilities(tmp_path / "hf", [t for t, _ in rows["test"]], 16)
    assert id2label == {str(i): label for i, label in enumerate(labels)}
    np.testing.assert_allclose(probabilities, np.loadtxt(out / "test_results.tsv", delimiter="\t"), atol=1e-4)
    # Its training_state directory as --input: the run's config and labels are found beside it.
    again = convert("--from=ours", "--to=tf1", f"--input={out}/training_state", f"--output={tmp_path}/tf1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "tf1" / "label_list.txt").read_text().splitlines() == labels
    assert json.loads((tmp_path / "tf1" / "bert_config.json").read_text()) == json.loads(
        (out / "bert_config.json").read_text())
