"""Mistakes found before any work, in one line: an output path of the wrong kind (a file to be
written where a directory is: create_pretraining_data.py and extract_features.py --output_file; a
directory where a file is: convert_checkpoint.py --output, --shard_mode's directory), and an
--init_checkpoint whose shapes are not the config's (before the data is tokenized)."""

import os

import pytest
from helpers.in_process import run_script

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
VOCAB = os.path.join(DATA, "tokenization", "vocab_zh.txt")


@pytest.mark.parametrize("script,flags,target,message", [
    ("create_pretraining_data.py", ["--input_file={corpus}", f"--vocab_file={VOCAB}"], "dir",
     "--output_file={target} is a directory; give the name of a file to write"),
    ("extract_features.py", ["--input_file={corpus}", f"--vocab_file={VOCAB}", "--bert_config_file=c.json",
                             "--init_checkpoint=ckpt"], "dir",
     "--output_file={target} is a directory; give the name of a file to write"),
    ("convert_checkpoint.py", ["--from=tf1", "--to=hf", "--input=ckpt"], "file",
     "--output={target} is a file; give the name of a directory to write"),
    ("create_pretraining_data.py", ["--input_file={corpus}", f"--vocab_file={VOCAB}", "--shard_mode"], "file",
     "--output_file={target} is a file; give the name of a directory to write"),
], ids=["create-data", "extract-features", "convert", "create-data-shards"])
def test_an_output_of_the_wrong_kind_is_one_line_before_any_work(tmp_path, script, flags, target, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("你好。\n世界。\n", encoding="utf-8")
    path = tmp_path / "target"
    if target == "dir":
        path.mkdir()
        (path / "kept.txt").write_text("x")
    else:
        path.write_text("kept")
    flag = "--output" if script == "convert_checkpoint.py" else "--output_file"
    status, stderr = run_script(script, *(f.format(corpus=corpus) for f in flags), f"{flag}={path}")
    assert status == 2, stderr
    assert stderr.strip().splitlines()[-1] == "error: " + message.format(target=path)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "target"]
    assert (path / "kept.txt").read_text() == "x" if target == "dir" else path.read_text() == "kept"


def test_an_init_checkpoint_of_other_shapes_is_refused_before_tokenizing(tmp_path):
    import json

    import numpy as np

    import modeling
    from bert_realformer import checkpoints
    config = {"vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 32, "max_position_embeddings": 32, "type_vocab_size": 2}
    model = modeling.BertModel(modeling.BertConfig.from_dict(dict(config, hidden_size=8)))
    model.build()
    values = {name: np.asarray(v) for name, v in modeling.tf1_variable_map(model).items()}
    checkpoints.write_tf1_checkpoint(values, str(tmp_path / "other" / "bert_model.ckpt"))
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]))
    (tmp_path / "train.tsv").write_text("1\ta b\n0\tb a\n")
    out = tmp_path / "out"
    status, stderr = run_script("run_classifier.py", "--task_name=thucnews", f"--data_dir={tmp_path}",
                                f"--vocab_file={vocab}", f"--bert_config_file={tmp_path}/bert_config.json",
                                f"--init_checkpoint={tmp_path}/other/bert_model.ckpt", f"--output_dir={out}",
                                "--do_train", "--max_seq_length=8")
    assert status == 2, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"error: --init_checkpoint={tmp_path}/other/bert_model.ckpt: bert/embeddings/word_embeddings has shape "
        "[30, 8] but --bert_config_file gives it [30, 16]: another model's checkpoint, or another model's config?")
    assert not (out / "train.tf_record").exists()


def test_a_run_refused_after_reading_its_data_leaves_nothing_and_the_corrected_run_goes_on(tmp_path):
    """A refusal that comes once the data is read (here the layers to re-initialise, which needs
    the config): what the run wrote (its label list) is removed with the directory it made, and a
    directory that was there keeps only what it held; the corrected run, with other labels, runs."""
    import json
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 21128, "hidden_size": 16, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "intermediate_size": 32}))
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("label\ttext\nbad\t差\ngood\t好\n", encoding="utf-8")

    def run_classifier(out, *flags):
        return run_script("run_classifier.py", "--task_name=generic", f"--data_dir={data}", f"--vocab_file={VOCAB}",
                          f"--bert_config_file={config}", f"--output_dir={out}", "--max_seq_length=8",
                          "--do_train", "--num_train_epochs=1", *flags)

    fresh, kept = tmp_path / "fresh", tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for out in (fresh, kept):
        status, stderr = run_classifier(out, "--reinit_top_layers=2")
        assert status == 2, stderr
        assert stderr.strip().splitlines()[-1] == f"error: --reinit_top_layers=2: {config} has 1 layers"
    assert not fresh.exists()
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]
    (data / "train.tsv").write_text("label\ttext\nneg\t差\npos\t好\n", encoding="utf-8")
    status, stderr = run_classifier(kept)
    assert status == 0, stderr[-3000:]
    assert (kept / "label_list.txt").read_text().split() == ["neg", "pos"]


@pytest.mark.parametrize("flags,message", [
    (["--doc_stride=32", "--truncation=tail"], "--truncation=tail cuts a text to one window; --doc_stride reads "
                                               "all of it in windows: use one or the other"),
    (["--doc_stride=32", "--window_training=pooled", "--group_by_length"],
     "--group_by_length groups windows by length; --window_training=pooled trains whole documents: use "
     "--window_training=separate or leave --group_by_length out"),
    (["--doc_stride=32", "--window_training=pooled", "--window_pooling=first"],
     "--window_pooling=first reads the first window alone: to train on it, leave --doc_stride out (head "
     "truncation); or train --window_pooling=max or auto"),
    (["--window_training=pooled"], "--window_training is for texts read in windows: it needs --doc_stride=N "
                                   "(without it a text is cut to --max_seq_length as --truncation says)"),
    (["--doc_stride=32", "--max_windows_per_document=2"],
     "--max_windows_per_document=2 limits the windows of a document trained together: it needs "
     "--window_training=pooled (separate training trains every window)"),
], ids=["truncation", "group-by-length", "first-window", "windows-without-stride", "window-cap-when-separate"])
def test_long_document_options_that_contradict_or_change_nothing_are_one_line(tmp_path, flags, message):
    import json
    out, config = tmp_path / "out", tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "intermediate_size": 32}))
    status, stderr = run_script("run_classifier.py", "--task_name=generic", f"--data_dir={tmp_path}",
                                f"--vocab_file={VOCAB}", f"--bert_config_file={config}", f"--output_dir={out}",
                                "--do_train", *flags)
    assert status == 2, stderr
    assert stderr.strip().splitlines()[-1] == "error: " + message
    assert not out.exists() or not any(out.iterdir())  # nothing written


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT_TASK_FLAGS = {  # each fine-tuning script and run_pretraining, with what it needs beside the model
    "run_classifier.py": ["--task_name=generic", "--data_dir={data}", "--do_train"],
    "run_ner.py": ["--task_name=generic", "--data_dir={data}", "--do_train"],
    "run_multiple_choice.py": ["--task_name=generic", "--data_dir={data}", "--do_train"],
    "run_squad.py": ["--do_train", "--train_file={data}/train.json"],
    "run_pretraining.py": ["--input_file={data}/train.tfrecord", "--do_train"],
}


def _release(directory, layout):
    """A released model's files, without weights (nothing before TensorFlow reads them): a TF1
    release (bert_config.json, vocab.txt, bert_model.ckpt.index) or a Hugging Face directory
    (config.json, model.safetensors, vocab.txt)."""
    import json
    directory.mkdir()
    sizes = {"vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 512}
    if layout == "tf1":  # (the embedding tables alone: the index is read before TensorFlow starts)
        import numpy as np

        from bert_realformer import checkpoints
        (directory / "bert_config.json").write_text(json.dumps(sizes))
        prefix = directory / "bert_model.ckpt"
        tables = {"word_embeddings": 30, "position_embeddings": 512, "token_type_embeddings": 16}
        checkpoints.write_tf1_checkpoint({f"bert/embeddings/{name}": np.zeros((rows, 16), np.float32)
                                          for name, rows in tables.items()}, str(prefix))
    else:
        (directory / "config.json").write_text(json.dumps({"model_type": "bert", **sizes}))
        (directory / "model.safetensors").write_bytes(b"")
        prefix = directory
    (directory / "vocab.txt").write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                    "a", "b"]))
    return prefix


def _without_tensorflow(script, flags, tmp_path):
    """(status, stderr) of `script` run where importing TensorFlow raises."""
    import subprocess
    import sys
    fake = tmp_path / "no_tensorflow" / "tensorflow"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text('raise RuntimeError("TensorFlow was imported")\n')
    done = subprocess.run([sys.executable, os.path.join(ROOT, script), *flags], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), ROOT])}, timeout=120)
    return done.returncode, done.stderr


@pytest.mark.parametrize("script", sorted(SCRIPT_TASK_FLAGS))
@pytest.mark.parametrize("layout", ["tf1", "hf"])
def test_mistakes_the_flags_and_files_show_end_before_tensorflow_starts(tmp_path, script, layout):
    """--bert_config_file and --vocab_file default to the checkpoint's own; a missing checkpoint,
    a length past the config's positions, another model's config (its tables against the
    checkpoint's index), a vocabulary not the checkpoint's, and no config at all each end in one
    line, exit 2, with nothing written and TensorFlow never imported."""
    prefix = _release(tmp_path / "release", layout)
    config = tmp_path / "release" / ("bert_config.json" if layout == "tf1" else "config.json")
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nb\na\n")
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    for name in ("train.json", "train.tfrecord"):
        (data / name).write_text("")
    common = [f"--output_dir={out}", *(flag.format(data=data) for flag in SCRIPT_TASK_FLAGS[script])]
    mistakes = [
        ([f"--init_checkpoint={tmp_path}/none"], f"--init_checkpoint={tmp_path}/none: no such file or directory"),
        ([f"--init_checkpoint={prefix}", "--max_seq_length=600"],
         f"--max_seq_length=600 exceeds max_position_embeddings 512 of {config}"),
        ([], "--bert_config_file is required (or --init_checkpoint, whose own is used)"),
    ]
    if layout == "tf1":  # the config of another model (read from the index)
        other = tmp_path / "other_config.json"
        other.write_text(config.read_text().replace('"hidden_size": 16', '"hidden_size": 8'))
        mistakes.append(([f"--init_checkpoint={prefix}", f"--bert_config_file={other}"],
                         f"--init_checkpoint={prefix}: bert/embeddings/word_embeddings has shape [30, 16] but "
                         "--bert_config_file gives it [30, 8]: another model's checkpoint, or another model's config?"))
    if script != "run_pretraining.py":  # (it reads token ids: no vocabulary)
        mistakes.append(([f"--init_checkpoint={prefix}", f"--vocab_file={foreign}"],
                         f"--vocab_file={foreign} is not the vocabulary of --init_checkpoint={prefix}: line 6 is "
                         f"'b' there and 'a' in its own {tmp_path}/release/vocab.txt, so the ids would mean other "
                         "tokens than the model learnt; use its vocabulary (or --allow_foreign_vocab for a "
                         "deliberate change)"))
    for flags, message in mistakes:
        status, stderr = _without_tensorflow(script, [*common, *flags], tmp_path)
        assert (status, stderr.strip().splitlines()[-1]) == (2, f"error: {message}"), stderr[-2000:]
        assert not out.exists()
    # The same command without the mistake goes on to TensorFlow (so the stand-in above did stop it).
    status, stderr = _without_tensorflow(script, [*common, f"--init_checkpoint={prefix}", "--max_seq_length=128"],
                                         tmp_path)
    assert status != 0 and "TensorFlow was imported" in stderr, stderr[-2000:]


def test_flags_that_contradict_each_other_end_before_tensorflow_starts(tmp_path):
    """Options that need another option end in their one line without TensorFlow."""
    prefix = _release(tmp_path / "release", "tf1")
    (tmp_path / "data").mkdir()
    common = ["--task_name=generic", f"--data_dir={tmp_path}/data", f"--init_checkpoint={prefix}",
              f"--output_dir={tmp_path}/out", "--do_eval"]
    for flags, message in (
            (["--keep_best_by=eval_accuracy"], "--keep_best_by needs --eval_every_steps (evaluations during training)"),
            (["--lora_alpha=4"], "--lora_alpha=4.0 is LoRA's: it needs --lora_rank=R"),
            (["--adversarial_epsilon=1"], "--adversarial_epsilon=1.0 is adversarial training's: it needs "
                                          "--adversarial=fgm or pgd"),
            (["--focal_gamma=1"], "--focal_gamma=1.0 is focal loss's: it needs --loss=focal")):
        status, stderr = _without_tensorflow("run_classifier.py", [*common, *flags], tmp_path)
        assert (status, stderr.strip().splitlines()[-1]) == (2, f"error: {message}"), stderr[-2000:]
