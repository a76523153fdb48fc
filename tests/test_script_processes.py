"""The fork server the tests start scripts from (`tests/helpers/script_processes.py`): a forked
script process is what `python SCRIPT` would be, as a test sees it (arguments, directory,
environment, streams, exit status, signals), and a command it cannot stand for starts plainly."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import script_processes

# A script that shows what it was started with, leaves output in its buffers (Python's ending
# flushes them), and ends with the status it is given.
SHOW = """import os, sys
print(sys.argv[1:], os.getcwd(), os.environ.get("SHOWN"), __name__, sys.path[0] == os.path.dirname(__file__))
print("to stderr", file=sys.stderr)
if sys.argv[1] == "raise":
    raise ValueError("a user's mistake")
if sys.argv[1] == "sleep":
    print("sleeping", flush=True)
    import time; time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def show(tmp_path):
    path = tmp_path / "show.py"
    path.write_text(SHOW)
    return str(path)


def _both(monkeypatch, command, **kwargs):
    """(forked result, plain result) of `run(command)`."""
    forked = script_processes.run(command, capture_output=True, text=True, timeout=120, **kwargs)
    monkeypatch.setenv("SCRIPT_PROCESSES", "plain")
    plain = script_processes.run(command, capture_output=True, text=True, timeout=120, **kwargs)
    monkeypatch.delenv("SCRIPT_PROCESSES")
    return forked, plain


def test_a_forked_script_sees_and_ends_as_a_plain_one(show, tmp_path, monkeypatch):
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    for status in ("0", "3", "raise"):
        forked, plain = _both(monkeypatch, [sys.executable, show, status], cwd=directory,
                              env={**os.environ, "SHOWN": "yes", "TF_CONFIG": "{}"})
        assert (forked.returncode, forked.stdout) == (plain.returncode, plain.stdout), (forked, plain)
        assert forked.stdout == f"['{status}'] {directory} yes __main__ True\n"
        assert forked.returncode == {"0": 0, "3": 3, "raise": 1}[status]
        if status == "raise":
            assert forked.stderr.startswith("to stderr\nTraceback") and forked.stderr.endswith(
                "ValueError: a user's mistake\n"), forked.stderr
        else:
            assert forked.stderr == plain.stderr == "to stderr\n"


def test_a_project_script_refuses_in_the_same_line(monkeypatch):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    forked, plain = _both(monkeypatch, [sys.executable, os.path.join(root, "run_classifier.py"),
                                        "--task_name=generic", "--max_seq_length=0"])
    assert forked.returncode == plain.returncode == 2
    assert forked.stderr == plain.stderr and forked.stderr.startswith("error: flag --max_seq_length=0: ")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_forked_script_is_a_process_of_its_own_that_a_signal_ends(show, how):
    proc = script_processes.Popen([sys.executable, show, "sleep"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().endswith("__main__ True\n") and proc.stdout.readline() == "sleeping\n"
    assert proc.poll() is None and proc.pid not in (os.getpid(), os.getppid())
    assert proc.started_plainly_for is None, proc.started_plainly_for
    proc.send_signal(how)
    assert proc.wait(timeout=30) == -how


def test_a_wait_with_a_timeout_times_out_while_the_script_runs(show):
    proc = script_processes.Popen([sys.executable, show, "sleep"], stdout=subprocess.DEVNULL)
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    assert time.monotonic() - started < 10
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_what_the_server_cannot_stand_for_starts_plainly(show):
    # Keras's backend is chosen as the server imports Keras; `-c` code is no script file.
    for command, env in (([sys.executable, show, "0"], {**os.environ, "KERAS_BACKEND": "jax"}),
                         ([sys.executable, "-c", "pass"], None)):
        proc = script_processes.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert proc.wait(timeout=120) == 0 and proc.started_plainly_for is not None


def test_a_script_that_starts_scripts_has_them_forked_too(tmp_path):
    # As run_study.py starts run_pretraining.py and run_classifier.py: the inner script comes
    # from the same server (its parent is the outer one's parent), and reads and ends as usual.
    inner = tmp_path / "inner.py"
    inner.write_text("import os, sys\nprint(os.getppid())\nsys.exit(4)\n")
    outer = tmp_path / "outer.py"
    outer.write_text(f"""import os, subprocess, sys
inner = subprocess.Popen([sys.executable, {str(inner)!r}], stdout=subprocess.PIPE, text=True)
print(inner.wait(), int(inner.stdout.read()) == os.getppid() != os.getpid(), inner.started_plainly_for)
""")
    result = script_processes.run([sys.executable, str(outer)], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "4 True None\n", "")
