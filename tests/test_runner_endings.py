"""How a script ends on what the machine ends (memory, a lost worker, a full disk, a permission,
a signal): one `error:` line and a distinct status, the output directory's claim released."""

import errno
import os

import pytest
import tensorflow as tf
from helpers import script_processes

from bert_realformer import runner
from bert_realformer.errors import KEPT_NOTE


def _ending(error, capsys):
    def main(argv):
        raise error
    status = runner.run_main(main, [])
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return status, lines[0]


@pytest.mark.parametrize("error, status, start", [
    (tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[4096,512,3072]"),
     runner.OUT_OF_MEMORY_STATUS, "error: out of memory (OOM when allocating tensor with shape[4096,512,3072]): "
                                  "the batch is too large for this device"),
    (tf.errors.UnavailableError(None, None, "Socket closed\nmore"), runner.LOST_WORKER_STATUS,
     "error: lost contact with another worker (Socket closed): restart every worker"),
    (tf.errors.UnavailableError(None, None, (  # (TensorFlow 2.21's words when a worker's process is gone)
        "Graph execution error:\n\nDetected at node while/CollectiveReduceV2_1 ...\nCollective ops is aborted by: "
        "Error reported from /job:worker/task:1: The following tasks are unhealthy (stopped sending heartbeats):\n"
        "/job:worker/replica:0/task:1\nThe tasks have crashed.")), runner.LOST_WORKER_STATUS,
     "error: lost contact with another worker (worker 1 stopped sending heartbeats): restart every worker"),
    (tf.errors.UnavailableError(None, None, (  # (the other words TensorFlow 2.21 has for it)
        "Graph execution error:\n\nDetected at node while/CollectiveReduceV2_2 ...\nCollective ops is aborted by: "
        "recvmsg:Connection reset by peer\nAdditional GRPC error information from remote target "
        "/job:worker/replica:0/task:1 while calling /tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received")),
     runner.LOST_WORKER_STATUS, "error: lost contact with another worker (worker 1: recvmsg:Connection reset by "
                                "peer): restart every worker"),
    (OSError(errno.ENOSPC, "No space left on device", "out/model.ckpt-5.index"), runner.DISK_FULL_STATUS,
     "error: no space left on the device writing out/model.ckpt-5.index; the files being written were removed"),
    (tf.errors.UnknownError(None, None, "out/train.tfrecord; No space left on device"), runner.DISK_FULL_STATUS,
     "error: no space left on the device; the files being written were removed"),
    (PermissionError(errno.EACCES, "Permission denied", "/models/out"), runner.PERMISSION_STATUS,
     "error: permission denied to /models/out: Permission denied"),
    (KeyboardInterrupt(), 130, "error: interrupted (SIGINT); the files being written were removed"),
    (runner.Terminated(), 143, "error: stopped by SIGTERM; the files being written were removed"),
])
def test_machine_endings_are_one_line_with_their_own_status(capsys, error, status, start):
    got_status, line = _ending(error, capsys)
    assert got_status == status and line.startswith(start), line


def test_a_bug_keeps_its_traceback():
    def main(argv):
        raise ZeroDivisionError("a bug")
    with pytest.raises(ZeroDivisionError):
        runner.run_main(main, [])


def test_an_ending_from_a_training_loop_names_the_training_state_that_is_intact(capsys):
    error = tf.errors.ResourceExhaustedError(None, None, "Graph execution error:\n\nOOM when allocating tensor")
    error.add_note(KEPT_NOTE + "the training state out/training_state/ckpt-20 is intact")  # (the driver's)
    status, line = _ending(error, capsys)
    assert status == runner.OUT_OF_MEMORY_STATUS
    assert line.startswith("error: out of memory (OOM when allocating tensor): ")
    assert line.endswith("; the files being written were removed and the training state "
                         "out/training_state/ckpt-20 is intact: run the same command again")


@pytest.mark.parametrize("output", ["file", "directory"])
def test_sigterm_met_where_python_ignores_exceptions_ends_in_one_line_without_a_traceback(tmp_path, output):
    """The signal handler's exception raised inside a `__del__` (as inside a GC callback of a
    library) is unraisable: no traceback is printed, no output finished after it replaces its
    final name (a file, a staged directory), and the script ends with its line and status 143."""
    import sys
    script = tmp_path / "script.py"
    script.write_text(
        "import os, signal\n"
        "from bert_realformer import runner, storage\n"
        "class Collected:\n"
        "    def __del__(self):\n"
        "        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # the handler, between bytecodes\n"
        "def main(argv):\n"
        "    Collected()\n"
        "    print('main went on', flush=True)\n"
        f"    os.makedirs('{tmp_path}/staged')\n"
        + (f"    storage.write_atomic('{tmp_path}/staged/weights', 'new')\n" if output == "file" else
           f"    open('{tmp_path}/staged/weights', 'w').write('new')\n"
           f"    storage.switch_in('{tmp_path}/staged', '{tmp_path}/final', last=())\n") +
        "    print('written', flush=True)\n"
        "runner.run(main)\n")
    result = script_processes.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 143, result.stderr
    assert "main went on" in result.stdout and "Traceback" not in result.stderr, result.stderr
    assert "written" not in result.stdout and not (tmp_path / "final").exists()
    assert os.listdir(tmp_path / "staged") == ([] if output == "file" else ["weights"])  # (the caller's cleanup)
    assert result.stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM; the files being written")


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_stop_after_the_work_is_done_lets_the_script_exit_as_it_finished(tmp_path, signal_name):
    """A SIGINT or SIGTERM met after `main` returned (in an exit handler, as TensorFlow's run at
    exit): the script ends with the status its work earned, with no traceback, its exit
    handlers run to their end."""
    import sys
    script = tmp_path / "script.py"
    script.write_text(
        "import atexit, os, signal, sys, time\n"
        "from bert_realformer import runner\n"
        "def late_stop():\n"
        f"    os.kill(os.getpid(), signal.{signal_name})\n"
        "    time.sleep(0.2)\n"
        f"    open('{tmp_path}/exit_handler_done', 'w').write('yes')\n"
        "def main(argv):\n"
        "    atexit.register(late_stop)\n"
        "    print('converted', file=sys.stderr)\n"
        "runner.run(main)\n")
    result = script_processes.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "converted"
    assert (tmp_path / "exit_handler_done").read_text() == "yes"


def test_the_options_an_error_names_are_printed_as_flags(capsys):
    from bert_realformer.errors import Diverged, InputError
    error = InputError("input_file: a.tfrecord is empty; see input_files and max_seq_length=8 (not max_seq_length2)",
                       options=("input_file", "max_seq_length"))
    assert str(error).startswith("input_file: a.tfrecord")  # the library's own words name no flag
    assert _ending(error, capsys) == (2, "error: --input_file: a.tfrecord is empty; see input_files and "
                                         "--max_seq_length=8 (not max_seq_length2)")
    assert _ending(Diverged("try a lower learning_rate", options=("learning_rate",)), capsys) == (
        3, "error: try a lower --learning_rate")
    assert _ending(InputError("output_dir is in use"), capsys) == (2, "error: output_dir is in use")  # none named
