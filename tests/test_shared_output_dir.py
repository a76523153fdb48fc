"""Two evaluation runs on one output directory (they do not claim it), started together with
other settings, each get their own features: 20 paired trials, every one equal to the run
alone (before, they shared `eval.tf_record` and could read each other's)."""

import json
import os
import subprocess
import sys

import numpy as np
from helpers import script_processes

import modeling
from bert_realformer import checkpoints

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "predict_trials.py")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["good", "bad", "film", "plot", "long", "short", "story", "music", "actor", "scene"]


def _results(proc):
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def test_two_evaluation_runs_on_one_directory_never_read_each_others_features(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("".join(f"{t}\n" for t in SPECIAL + WORDS))
    config = {"vocab_size": len(SPECIAL + WORDS), "hidden_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
              "type_vocab_size": 2}
    (model / "bert_config.json").write_text(json.dumps(config))
    classifier = modeling.BertClassifier(modeling.BertConfig.from_dict(config), 2)
    classifier.build()
    rng = np.random.default_rng(0)
    values = {name: rng.normal(0, 0.5, v.shape).astype("float32")
              for name, v in modeling.tf1_variable_map(classifier).items()}
    checkpoints.write_tf1_checkpoint(values, str(model / "bert_model.ckpt"))

    alone = {length: _results(script_processes.Popen(
        [sys.executable, HELPER, str(tmp_path / f"alone-{length}"), f"{model}/bert_model.ckpt",
         f"{model}/vocab.txt", f"{model}/bert_config.json", str(length), "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))[0] for length in (8, 12)}
    assert alone[8] != alone[12]  # the two settings give different answers

    shared = tmp_path / "shared"
    runs = {length: script_processes.Popen(
        [sys.executable, HELPER, str(shared), f"{model}/bert_model.ckpt", f"{model}/vocab.txt",
         f"{model}/bert_config.json", str(length), "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for length in (8, 12)}
    for length, proc in runs.items():
        trials = _results(proc)
        assert len(trials) == 20 and all(trial == alone[length] for trial in trials), length
