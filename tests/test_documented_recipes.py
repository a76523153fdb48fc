"""The README's quick start and its five commands, run as a user runs them: each code block taken
from README.md as it is and run by bash, its placeholders pointed at a release and real data: a
tiny released-style TF1 checkpoint (the 21128-token Chinese vocabulary) with People's Daily and
review sentiment, and for the five commands also the real all-MiniLM-L6-v2 Hugging Face directory
(no MLM head) with English sentences and sentiment. The installed commands
(`bert-run-classifier`, ...) are stood in for by wrappers that run the same script and append
only the flags that size the run down (lengths, batches, steps), so the commands tested are the
documented ones."""

import json
import os
import random
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

import modeling
from bert_realformer import checkpoints

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
# What makes each documented command a run of seconds; absl takes a flag's last value.
SIZED_DOWN = {
    "create_pretraining_data": "--max_seq_length=32 --max_predictions_per_seq=5",
    "run_pretraining": "--max_seq_length=32 --max_predictions_per_seq=5 --train_batch_size=4 "
                       "--gradient_accumulation_steps=2 --num_train_steps=4 --num_warmup_steps=1 --eval_every_steps=2 "
                       "--max_eval_steps=2 --eval_batch_size=4 --save_checkpoints_steps=2 "
                       "--residual_attention_warmup_steps=3 --head_fit_steps=2",
    "run_classifier": "--max_seq_length=32 --train_batch_size=16 --num_train_epochs=1 --eval_every_steps=4 "
                      "--eval_batch_size=32 --predict_batch_size=32 --learning_rate=1e-3",
    "extend_vocabulary": "",
    "convert_checkpoint": "",
}
NEW_TOKENS = ["“", "”", "—", "…"]
ENGLISH_NEW_TOKENS = ["realformer", "pretrainer", "wordpieces"]


def readme_block(heading):
    """The first bash block under README.md's `## heading`."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index(f"## {heading}\n"):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def _wrappers(directory):
    """The installed commands, each running its script with the flags that size it down."""
    directory.mkdir()
    for script, flags in SIZED_DOWN.items():
        wrapper = directory / f"bert-{script.replace('_', '-')}"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bert_realformer.cli.{script} "$@" {flags}\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(directory)


def _write_task(directory, rows):
    """train/dev/test.tsv of (text, label) rows: 96, 64 and 24 of them."""
    directory.mkdir()
    for name, part in (("train", rows[:96]), ("dev", rows[96:160]), ("test", rows[160:184])):
        lines = [f"{text.replace(chr(9), ' ')}\t{label}" for text, label in part]
        (directory / f"{name}.tsv").write_text("text\tlabel\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(directory)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """{name: path}: a tiny checkpoint laid out as a TF1 release, a corpus, a TSV task, the wrappers."""
    from bert_realformer import realdata
    root = tmp_path_factory.mktemp("documented")
    ckpt = root / "chinese_tiny_L-2_H-32"
    ckpt.mkdir()
    config = modeling.BertConfig(vocab_size=21128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    (ckpt / "bert_config.json").write_text(config.to_json_string(), encoding="utf-8")
    (ckpt / "vocab.txt").write_bytes(open(VOCAB, "rb").read())
    checkpoints.save_tf1_checkpoint(modeling.BertPretrainer(config), str(ckpt / "bert_model.ckpt"))
    corpus = root / "corpus"
    corpus.mkdir()
    realdata.write_peoples_daily_corpus(str(corpus / "train.txt"), max_documents=40)
    realdata.write_peoples_daily_corpus(str(corpus / "heldout.txt"), max_documents=8, first_document=40)
    (root / "tokens.txt").write_text("\n".join(NEW_TOKENS) + "\n", encoding="utf-8")
    rows = realdata.sentiment_reviews()
    random.Random(0).shuffle(rows)
    return {"root": root, "CKPT": str(ckpt), "CORPUS": str(corpus), "TOKENS": str(root / "tokens.txt"),
            "DATA": _write_task(root / "sentiment", rows), "bin": _wrappers(root / "bin"), "test_rows": 24,
            "SEGMENTATION": "--chinese_word_segmentation=jieba", "LENGTH": "64", "PREDICTIONS": "10",
            "vocab": VOCAB, "new_tokens": NEW_TOKENS, "labels": ["0", "1"]}


@pytest.fixture(scope="module")
def minilm_world(tmp_path_factory):
    """The same placeholders for the real all-MiniLM-L6-v2 directory and English text."""
    from helpers.minilm import minilm_dir

    from bert_realformer.realdata.english import english_sentiment_splits
    from bert_realformer.realdata.english_corpus import english_corpus
    ckpt = minilm_dir()
    root = tmp_path_factory.mktemp("documented_minilm")
    corpus = root / "corpus"
    corpus.mkdir()
    texts = english_corpus()
    for name, part in (("train", texts["train"][:200]), ("heldout", texts["held_out"][:40])):
        documents = ["\n".join(part[start:start + 5]) for start in range(0, len(part), 5)]
        (corpus / f"{name}.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    own = set(_lines(open(os.path.join(ckpt, "vocab.txt"), encoding="utf-8").read()))
    assert not own & set(ENGLISH_NEW_TOKENS)
    (root / "tokens.txt").write_text("\n".join(ENGLISH_NEW_TOKENS) + "\n", encoding="utf-8")
    splits = english_sentiment_splits()
    rows = splits["train"][:96] + splits["dev"][:64] + splits["test"][:24]
    return {"root": root, "CKPT": ckpt, "CORPUS": str(corpus), "TOKENS": str(root / "tokens.txt"),
            "DATA": _write_task(root / "sentiment", rows), "bin": _wrappers(root / "bin"), "test_rows": 24,
            "SEGMENTATION": "", "LENGTH": "512", "PREDICTIONS": "77",
            "vocab": os.path.join(ckpt, "vocab.txt"), "new_tokens": ENGLISH_NEW_TOKENS,
            "labels": ["negative", "positive"]}


PLACEHOLDERS = ("CKPT", "CORPUS", "TOKENS", "DATA", "SEGMENTATION", "LENGTH", "PREDICTIONS")


def run_block(block, world, cwd):
    cwd.mkdir()
    environment = {**os.environ, "PATH": world["bin"] + os.pathsep + os.environ["PATH"],
                   "PYTHONPATH": ROOT, **{name: world[name] for name in PLACEHOLDERS if name in world}}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def _served(version_dir, texts):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    model = tf.saved_model.load(str(version_dir))
    return model.signatures["serving_default"](text_a=tf.constant(texts))["probabilities"].numpy()


def _check_classifier_run(out, world):
    """A fine-tuning run's documented outputs; its SavedModel gives test_results.tsv's rows."""
    results = dict(line.split(" = ", 1) for line in (out / "eval_results.txt").read_text().splitlines())
    assert 0.0 <= float(results["eval_accuracy"]) <= 1.0 and "macro_f1" in results
    assert (out / "label_list.txt").read_text().split() == world["labels"]
    assert json.loads((out / "best" / "best.json").read_text())["step"] >= 1
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (world["test_rows"], 2)
    (version,) = (out / "serving").iterdir()
    texts = [line.split("\t")[0] for line in
             open(os.path.join(world["DATA"], "test.tsv"), encoding="utf-8").read().splitlines()[1:]]
    np.testing.assert_allclose(_served(version, texts), probabilities, atol=1e-5)


def _lines(text):
    """A vocabulary's lines (split at newlines only: some tokens are characters `splitlines` splits at)."""
    return text.removesuffix("\n").split("\n")


def test_the_quick_start_fine_tunes_predicts_and_exports(world):
    done = run_block(readme_block("Quick start: fine-tune a released checkpoint"), world, world["root"] / "quick")
    _check_classifier_run(world["root"] / "quick" / "out", world)
    assert "wrote out/test_results.tsv\n" in done.stderr  # (where --do_predict's probabilities went)


@pytest.mark.parametrize("release", ["tf1", "minilm"])
def test_the_five_commands_continue_a_checkpoint_as_realformer_and_ship_it(release, request):
    world = request.getfixturevalue("world" if release == "tf1" else "minilm_world")
    done = run_block(readme_block("Your checkpoint in five commands"), world, world["root"] / "five")
    work = world["root"] / "five"
    # 1. The vocabulary grew by the new tokens; every old id kept.
    old = _lines(open(world["vocab"], encoding="utf-8").read())
    grown = _lines((work / "extended" / "vocab.txt").read_text(encoding="utf-8"))
    assert grown == old + world["new_tokens"]
    assert json.loads((work / "extended" / "bert_config.json").read_text())["vocab_size"] == len(grown)
    # 2. Unmasked records without NSP, both parts.
    assert (work / "data" / "train.tfrecord").stat().st_size > 0 and (work / "data" / "heldout.tfrecord").is_file()
    # 3. MLM-only RealFormer from the extended checkpoint, its first held-out point at step 0.
    history = [json.loads(line) for line in (work / "continued" / "eval_history.jsonl").read_text().splitlines()]
    assert [point["step"] for point in history] == [0, 2, 4]
    assert "masked_lm_accuracy" in history[0] and not any("next_sentence" in key for key in history[0])
    assert json.loads((work / "continued" / "bert_config.json").read_text())["residual_attention"] == "sum"
    assert "variant: post-LN checkpoint -> RealFormer" in done.stderr  # said as the run starts
    assert "carried scores weigh 0 at step 0, rising to 1 at step 3" in done.stderr  # the warm start
    assert json.loads((work / "continued" / "training_options.json").read_text())[
        "residual_attention_warmup_steps"] == 3
    # (MiniLM is released without its MLM head: one is fitted on its frozen encoder first.)
    assert ("has no MLM head (cls/predictions): fitting one" in done.stderr) == (release == "minilm")
    # 4. Fine-tuned from the continued model and exported.
    world = {**world, "root": work}
    _check_classifier_run(work / "finetuned", world)
    # 5. The release holds the continued model's weights exactly, its config and vocabulary.
    shipped = checkpoints.read_tf1_checkpoint(str(work / "release"))
    trained = checkpoints.read_tf1_checkpoint(str(work / "continued" / "model.ckpt-4"))
    assert set(shipped) == set(trained) and "cls/seq_relationship/output_weights" not in shipped
    for name, value in trained.items():
        np.testing.assert_array_equal(shipped[name], value, err_msg=name)
    released = json.loads((work / "release" / "bert_config.json").read_text())
    assert released["residual_attention"] == "sum" and released["vocab_size"] == len(grown)
    assert _lines((work / "release" / "vocab.txt").read_text(encoding="utf-8")) == grown
