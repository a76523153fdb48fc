"""How runs end where clusters and preemptible machines run them: SIGTERM saves a training state
and the restart ends as the uninterrupted run (one device, and two workers that agree on the
step); one run per output directory (a second run stops at once; a SIGKILLed run's claim is
taken over)."""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
from helpers import script_processes
from helpers.pretraining_runs import (
    TINY,
    assert_same_run,
    command,
    finished,
    loopback_workers,
    run,
    uninterrupted_run,
)

from bert_realformer import checkpoints

pytestmark = pytest.mark.slow  # the scripts end to end, in subprocesses

FLAGS = ["--do_train", "--do_eval", "--num_train_steps=30", "--iterations_per_loop=1", "--max_eval_steps=3",
         "--save_checkpoints_steps=1000"]  # no periodic training state before the end


class StderrWatcher:
    """Reads a process's stderr in a thread; `wait_for(text)` until a line holds it."""

    def __init__(self, proc):
        self.lines, self._proc = [], proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self._proc.stderr:
            self.lines.append(line)

    def wait_for(self, predicate, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(predicate(line) for line in self.lines):
                return
            if self._proc.poll() is not None:
                self._thread.join(5)
                if any(predicate(line) for line in self.lines):
                    return
                pytest.fail("the run ended first:\n" + "".join(self.lines)[-3000:])
            time.sleep(0.05)
        pytest.fail("timed out:\n" + "".join(self.lines)[-3000:])

    def text(self):
        self._thread.join(30)
        return "".join(self.lines)


def _trained_step(line):
    return int(line.split("/")[0].split()[1]) if line.startswith("step ") else 0


def test_sigterm_saves_a_training_state_and_the_restart_ends_as_the_uninterrupted_run(tmp_path):
    whole_dir, stopped_dir = uninterrupted_run(tmp_path, FLAGS, "stopped")
    cmd = command(stopped_dir, *FLAGS)
    proc = script_processes.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watcher = StderrWatcher(proc)
    watcher.wait_for(lambda line: _trained_step(line) >= 3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143
    stderr = watcher.text()
    last = stderr.strip().splitlines()[-1]
    state = stopped_dir / "out" / "training_state"
    saved = int(last.split(" at step ")[1].split(":")[0])
    assert last == (f"error: stopped by SIGTERM at step {saved}: training state saved to {state}/ckpt-{saved}; "
                    "run the same command again to resume"), stderr[-2000:]
    assert 3 <= saved < 30 and (state / f"ckpt-{saved}.index").exists()
    assert not (stopped_dir / "out" / "eval_results.txt").exists()
    assert not (stopped_dir / "out" / "run_claim.json").exists()  # released on the way out

    resumed = run(cmd)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {state}/ckpt-{saved} at step {saved}" in resumed.stderr
    assert_same_run(whole_dir, stopped_dir, 30)


def test_a_second_run_on_a_claimed_output_dir_stops_at_once_and_a_killed_runs_claim_is_taken_over(tmp_path):
    def start(steps):
        proc = script_processes.Popen(command(tmp_path, "--do_train", f"--num_train_steps={steps}",
                                              "--iterations_per_loop=1", "--save_checkpoints_steps=5"),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return proc, StderrWatcher(proc)

    first, watcher = start(120)
    watcher.wait_for(lambda line: _trained_step(line) >= 6)
    claim_file = tmp_path / "out" / "run_claim.json"
    claim = json.loads(claim_file.read_text())
    assert claim["pid"] == first.pid and claim["host"] == socket.gethostname()

    started = time.time()
    second = run(command(tmp_path, "--do_train", "--num_train_steps=400"))
    assert second.returncode == 2 and time.time() - started < 60
    message = second.stderr.strip().splitlines()[-1]
    assert message.startswith(f"error: --output_dir={tmp_path / 'out'} is in use by a run on host "
                              f"{socket.gethostname()}, pid {first.pid}, started {claim['started']}")
    assert "weights:" not in second.stderr  # stopped before building or loading anything
    # An eval-only run reads the claimed directory's finished checkpoints without claiming it.
    evaluated = run(command(tmp_path, "--do_eval", "--max_eval_steps=2"))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    # The first run is unaffected: it finishes, exports its last step and releases the claim.
    assert first.wait(timeout=600) == 0, watcher.text()[-3000:]
    assert "step 120/120" in watcher.text() and (tmp_path / "out" / "model.ckpt-120.index").exists()
    assert not claim_file.exists()

    killed, watcher = start(400)
    watcher.wait_for(lambda line: _trained_step(line) >= 126)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert json.loads(claim_file.read_text())["pid"] == killed.pid  # left behind
    resumed = run(command(tmp_path, "--do_train", "--num_train_steps=400", "--iterations_per_loop=50",
                          "--save_checkpoints_steps=50"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"taking over {tmp_path / 'out'} from a run on host" in resumed.stderr
    assert f"process {killed.pid} is gone" in resumed.stderr
    assert "weights: resuming from" in resumed.stderr and "step 400/400" in resumed.stderr
    assert not claim_file.exists()


def test_two_workers_save_at_the_same_step_when_one_gets_sigterm(tmp_path):
    """Two loopback workers; SIGTERM to worker 1 only: both save a training state at one step and
    exit 143; restarted, they end with the weights of an uninterrupted two-worker run."""
    config = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    flags = ["--do_train", "--num_train_steps=30", "--iterations_per_loop=1", "--save_checkpoints_steps=1000",
             "--distribution_strategy=multi_worker"]

    def start(directory):
        return loopback_workers(command(directory, *flags, config=config))

    whole_dir, stopped_dir = tmp_path / "whole", tmp_path / "stopped"
    whole_dir.mkdir()
    stopped_dir.mkdir()
    finished(start(whole_dir))

    procs = start(stopped_dir)
    watchers = [StderrWatcher(p) for p in procs]
    watchers[1].wait_for(lambda line: _trained_step(line) >= 3)
    procs[1].send_signal(signal.SIGTERM)
    assert [p.wait(timeout=300) for p in procs] == [143, 143]
    texts = [w.text() for w in watchers]
    # Each script's last line of its own (TensorFlow's coordination thread may still log a lost
    # heartbeat after it, once the other worker has gone).
    endings = [next((line for line in reversed(t.splitlines()) if line.startswith("error: ")), "") for t in texts]
    assert all(" at step " in e for e in endings), texts[0][-3000:] + texts[1][-3000:]
    steps = [int(e.split(" at step ")[1].split(":")[0]) for e in endings]
    assert steps[0] == steps[1] and 3 <= steps[0] < 30, endings
    out = stopped_dir / "out"
    assert endings[0] == (f"error: stopped by SIGTERM (sent to another worker) at step {steps[0]}: training state "
                          f"saved to {out}/training_state/ckpt-{steps[0]}; run the same command again to resume")
    assert endings[1] == (f"error: stopped by SIGTERM at step {steps[0]}: training state saved to "
                          f"{out}/worker_1/training_state/ckpt-{steps[0]}; run the same command again to resume")

    restarted = start(stopped_dir)
    outputs = [p.communicate(timeout=600)[1] for p in restarted]
    assert [p.returncode for p in restarted] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert f"resuming from {out}/training_state/ckpt-{steps[0]} at step {steps[0]}" in outputs[0]
    a = checkpoints.read_tf1_checkpoint(str(whole_dir / "out" / "model.ckpt-30"))
    b = checkpoints.read_tf1_checkpoint(str(out / "model.ckpt-30"))
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5, err_msg=name)


def test_two_workers_restarted_from_states_of_different_steps_both_stop_naming_the_steps(tmp_path):
    """A worker killed during a save keeps an older training state than the chief: restarted
    with the same command, both workers stop before any step with one line naming each one's
    step (not train on 2 steps apart and exit 0)."""
    config = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}

    def start(steps):
        flags = ["--do_train", f"--num_train_steps={steps}", "--iterations_per_loop=1", "--save_checkpoints_steps=2",
                 "--keep_checkpoint_max=10", "--distribution_strategy=multi_worker"]
        procs = loopback_workers(command(tmp_path, *flags, config=config))
        return procs, [p.communicate(timeout=600)[1] for p in procs]

    procs, outputs = start(4)
    assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    state = tmp_path / "out" / "worker_1" / "training_state"
    for path in state.glob("ckpt-4*"):  # worker 1 as if killed during its step-4 save
        path.unlink()
    (state / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n')
    procs, outputs = start(6)
    assert [p.returncode for p in procs] == [2, 2], outputs[0][-3000:] + outputs[1][-3000:]
    for text in outputs:
        last = text.strip().splitlines()[-1]
        assert last.startswith("error: the workers would resume from training states of different steps (worker 0 "
                               "at step 4, worker 1 at step 2): remove the training states after step 2"), last
        assert "step 5/" not in text
    assert not (tmp_path / "out" / "model.ckpt-6.index").exists()


def test_a_worker_lost_mid_run_ends_the_other_in_one_line_naming_its_training_state(tmp_path):
    """SIGKILL to worker 1 mid-run: worker 0 does not hang; it ends within a minute with status
    6, one line saying to restart every worker, and the training state that is intact."""
    config = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    flags = ["--do_train", "--num_train_steps=100000", "--iterations_per_loop=1", "--save_checkpoints_steps=2",
             "--distribution_strategy=multi_worker"]
    procs = loopback_workers(command(tmp_path, *flags, config=config))
    watchers = [StderrWatcher(p) for p in procs]
    try:
        watchers[0].wait_for(lambda line: _trained_step(line) >= 5)
        procs[1].kill()
        killed_at = time.time()
        assert procs[0].wait(timeout=120) == 6, watchers[0].text()[-3000:]
        assert time.time() - killed_at < 60
    finally:
        for proc in procs:
            proc.kill()
    text = watchers[0].text()
    last = text.strip().splitlines()[-1]
    assert last.startswith("error: lost contact with another worker (worker 1") and (
        "restart every worker with the same command (they resume from their training states)" in last), last
    state = last.split("the training state ")[1].split(" is intact")[0]
    assert state.startswith(f"{tmp_path}/out/training_state/ckpt-") and os.path.exists(state + ".index"), last
    assert "Traceback" not in text
