"""run_pretraining.py in subprocesses on the tiny config and the fixture records: the command
lines and readings that the pretraining end-to-end tests share."""

import json
import os
import subprocess
import sys

from helpers import script_processes

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
    return script_processes.run(cmd, capture_output=True, text=True, timeout=timeout)


def run_here(cmd):
    """`run(cmd)` with the script run in this process: for what a run computes or refuses, not
    for how its process starts, is killed or resumes."""
    from helpers.in_process import completed_in_process
    return completed_in_process(os.path.basename(cmd[1]), *cmd[2:])


def eval_results(directory):
    return dict(line.split(" = ") for line in (directory / "eval_results.txt").read_text().splitlines())


def latest_saved_step(state_dir):
    """The step of the newest complete training state: the one TensorFlow's `checkpoint` file
    names (it is rewritten atomically after a save's files are in place), 0 before any."""
    import tensorflow as tf

    from bert_realformer.checkpoints.training_states import step_of

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


def loopback_workers(cmd, ports=None):
    """`cmd` started as the workers of a cluster on 127.0.0.1, one a port of `ports` (default: two
    free ones; clusters started side by side take theirs from one `free_ports` call, so that
    none is handed out twice) -> the processes (TF_CONFIG set; stderr piped)."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports or free_ports(2)]}
    return [script_processes.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "TF_CONFIG": json.dumps(
                                       {"cluster": cluster, "task": {"type": "worker", "index": i}})})
            for i in range(len(cluster["worker"]))]


def finished(procs):
    """The processes run to the end; each must succeed -> their stderr."""
    outputs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), "\n".join(text[-3000:] for text in outputs)
    return outputs


def step_losses(stderr):
    return [float(line.split("loss ")[1].split(" ")[0]) for line in stderr.splitlines()
            if line.startswith("step ")]


def uninterrupted_run(tmp_path, flags, name):
    """Runs `flags` to the end in tmp_path/whole; returns (that directory, an empty tmp_path/name)
    for the run to compare with it."""
    whole_dir, other_dir = tmp_path / "whole", tmp_path / name
    whole_dir.mkdir()
    other_dir.mkdir()
    whole = run(command(whole_dir, *flags))
    assert whole.returncode == 0, whole.stderr[-3000:]
    return whole_dir, other_dir


def assert_same_run(a_dir, b_dir, step, keys=("loss", "masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy")):
    """The two runs' model.ckpt-STEP weights and eval results (`keys`) agree to 1e-5."""
    import numpy as np

    from bert_realformer import checkpoints
    a = checkpoints.read_tf1_checkpoint(str(a_dir / "out" / f"model.ckpt-{step}"))
    b = checkpoints.read_tf1_checkpoint(str(b_dir / "out" / f"model.ckpt-{step}"))
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5, err_msg=name)
    a_eval, b_eval = eval_results(a_dir / "out"), eval_results(b_dir / "out")
    assert a_eval["global_step"] == b_eval["global_step"] == str(step)
    for key in keys:
        assert abs(float(a_eval[key]) - float(b_eval[key])) < 1e-5, key


def killed_after_a_save(cmd, state_dir, at_least=10):
    """Starts `cmd` and SIGKILLs it once it has saved a training state of step `at_least` or
    later; returns the step of the newest complete state it left."""
    import signal
    import time

    import pytest
    proc = script_processes.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and latest_saved_step(state_dir) < at_least:
        if proc.poll() is not None:
            pytest.fail("training ended before it could be killed: " + proc.stderr.read()[-2000:])
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return latest_saved_step(state_dir)
