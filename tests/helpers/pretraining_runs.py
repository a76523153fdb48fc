"""run_pretraining.py in subprocesses on the tiny config and the fixture records: the command
lines and readings that the pretraining end-to-end tests share."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
RECORDS = os.path.join(DATA, "pretraining_data", "plain.tfrecord")  # seq 64, 10 predictions
TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2,
        "residual_attention": "sum"}


def command(tmp_path, *flags, config=None, input_file=RECORDS):
    config_path = tmp_path / "bert_config.json"
    if not config_path.exists():
        config_path.write_text(json.dumps(config or TINY))
    return [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
            f"--bert_config_file={config_path}", f"--input_file={input_file}",
            f"--output_dir={tmp_path / 'out'}", "--max_seq_length=64",
            "--max_predictions_per_seq=10", "--train_batch_size=8", "--learning_rate=1e-3",
            "--num_warmup_steps=2", *flags]


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def eval_results(directory):
    return dict(line.split(" = ") for line in (directory / "eval_results.txt").read_text().splitlines())


def latest_saved_step(state_dir):
    """The step of the newest complete training state: the one TensorFlow's `checkpoint` file
    names (it is rewritten atomically after a save's files are in place), 0 before any."""
    import tensorflow as tf

    from training.checkpointing import step_of

    latest = tf.train.latest_checkpoint(str(state_dir)) if state_dir.exists() else None
    return step_of(latest) if latest else 0


def free_ports(n):
    import socket
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def step_losses(stderr):
    return [float(line.split("loss ")[1].split(" ")[0]) for line in stderr.splitlines()
            if line.startswith("step ")]
