"""How a script ends on what the machine ends (memory, a lost worker, a full disk, a permission,
a signal): one `error:` line and a distinct status, the output directory's claim released."""

import errno
import os

import pytest
import tensorflow as tf
from helpers import script_processes

from bert_realformer.commandline import runner
from bert_realformer.errors import KEPT_NOTE


def _ending(error, capsys):
    """(status, its one line) of a script whose main raises `error`, or calls it when a function."""
    def main(argv):
        if callable(error):
            error()
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
        "from bert_realformer import storage\nfrom bert_realformer.commandline import runner\n"
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


def test_an_error_a_library_made_of_the_sigterm_ends_as_the_sigterm(capsys):
    """The handler's exception caught inside a library that raised another error in its place
    (TensorFlow tracing a function): the script ends as stopped by SIGTERM, 143, not with a
    bug's traceback; the same error without a SIGTERM stays a bug."""
    import signal

    from bert_realformer.errors import SigtermHandler, Terminated

    def library_call():
        try:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # (the signal, between bytecodes)
        except Terminated:
            pass
        raise ValueError("Tried to convert 'shape' to a tensor and failed. Error: None values not supported.")

    previous = signal.signal(signal.SIGTERM, SigtermHandler())
    try:
        with pytest.raises(ValueError):
            runner.run_main(lambda argv: _raise(ValueError("a bug")), [])
        ending = _ending(library_call, capsys)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ending == (143, f"error: stopped by SIGTERM; {runner.INTACT}")


def test_a_sigterm_in_a_deferred_block_is_raised_on_leaving_it(capsys):
    """Inside `sigterm_deferred` (around TensorFlow's SavedModel writer, which prints the
    traceback of any exception it catches) the signal is only remembered: the block runs to its
    end, prints nothing, and `Terminated` comes on leaving it; outside the scripts' handler the
    block changes nothing."""
    import os
    import signal
    import traceback

    from bert_realformer.errors import SigtermHandler, Terminated, sigterm_deferred

    ran_to_the_end = []
    previous = signal.signal(signal.SIGTERM, SigtermHandler())
    try:
        with pytest.raises(Terminated), sigterm_deferred():
            try:  # (a library's own handling)
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))  # (bytecodes, where the handler runs)
            except Exception:
                traceback.print_exc()
            ran_to_the_end.append(True)
        assert signal.getsignal(signal.SIGTERM).deferred == 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ran_to_the_end == [True] and capsys.readouterr().err == ""
    with sigterm_deferred():  # (the default handler here: nothing to defer)
        ran_to_the_end.append(True)
    assert ran_to_the_end == [True, True]


def _raise(error):
    raise error


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_stop_after_the_work_is_done_lets_the_script_exit_as_it_finished(tmp_path, signal_name):
    """A SIGINT or SIGTERM met after `main` returned (in an exit handler, as TensorFlow's run at
    exit): the script ends with the status its work earned, with no traceback, its exit
    handlers run to their end."""
    import sys
    script = tmp_path / "script.py"
    script.write_text(
        "import atexit, os, signal, sys, time\n"
        "from bert_realformer.commandline import runner\n"
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


@pytest.mark.parametrize("stopped", ["inside the save", "while copying in"])
def test_a_sigterm_during_an_export_leaves_neither_its_temporary_nor_a_partial_version(tmp_path, monkeypatch,
                                                                                       stopped):
    """SIGTERM met where Python loses it (a `__del__` inside `tf.saved_model.save`), or raised
    while the written files are copied to the version's name (on a filesystem without a
    directory rename: an object store's, here `ram://`): `Terminated`, and EXPORT_DIR holds
    nothing, neither the temporary nor a version without its saved_model.pb."""
    import signal

    import modeling
    from bert_realformer import storage
    from bert_realformer.errors import SigtermHandler, Terminated
    from bert_realformer.inference import export

    handler = SigtermHandler()
    monkeypatch.setattr(signal, "getsignal", lambda number: handler if number == signal.SIGTERM else None)
    export_dir = str(tmp_path / "export") if stopped == "inside the save" else f"ram://{tmp_path}/export"

    def save(module, path, signatures):
        for name in ("saved_model.pb", "fingerprint.pb", "variables/variables.index"):
            tf.io.gfile.makedirs(os.path.dirname(f"{path}/{name}"))
            with tf.io.gfile.GFile(f"{path}/{name}", "wb") as f:
                f.write(b"written")
        if stopped == "inside the save":
            handler.received = True  # (the handler ran; its exception was unraisable)
    monkeypatch.setattr(tf.saved_model, "save", save)

    class CopyInterrupted:
        """tf.io.gfile, with SIGTERM raised as the second file is copied."""
        copied = 0

        def __getattr__(self, name):
            return getattr(tf.io.gfile, name)

        def copy(self, *args, **kwargs):
            if self.copied:
                handler.received = True
                raise Terminated()
            self.copied += 1
            tf.io.gfile.copy(*args, **kwargs)
    gfile = CopyInterrupted()
    monkeypatch.setattr(storage, "_gfile", lambda: gfile)

    config = modeling.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, max_position_embeddings=16)
    vocab = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tokenization", "vocab_en_uncased.txt")
    with pytest.raises(Terminated):
        export.export_encoder(modeling.BertModel(config), export.ServedText(vocab, True, 16), export_dir)
    assert tf.io.gfile.listdir(export_dir) == []
    assert gfile.copied == (stopped == "while copying in")
