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


@pytest.mark.parametrize("flags,message", [
    (["--doc_stride=32", "--truncation=tail"], "--truncation=tail cuts a text to one window; --doc_stride reads "
                                               "all of it in windows: use one or the other"),
    (["--doc_stride=32", "--window_training=pooled", "--group_by_length"],
     "--group_by_length groups windows by length; --window_training=pooled trains whole documents: use "
     "--window_training=separate or leave --group_by_length out"),
    (["--doc_stride=32", "--window_training=pooled", "--window_pooling=first"],
     "--window_pooling=first reads the first window alone: to train on it, leave --doc_stride out (head "
     "truncation); or train --window_pooling=max or auto"),
], ids=["truncation", "group-by-length", "first-window"])
def test_long_document_options_that_contradict_each_other_are_one_line(tmp_path, flags, message):
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
