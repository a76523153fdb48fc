"""The error types the scripts end on: user mistakes (a flag, a file, a line of data), runs
stopped on purpose (a signal) and runs that diverged."""

import contextlib
import os
import signal


class InputError(ValueError):
    """Bad user input; the message names the option, file or line and what was expected. The
    scripts print it as one line `error: <message>` and exit with status 2 (see
    `bert_realformer.commandline.runner.run`).

    `options`: the options the message names, by their Python names (`max_seq_length`), each
    also the name of the scripts' flag that sets it: the scripts print them as flags
    (`--max_seq_length`, `runner.as_flags`); the library's own message names no flag.
    """
    is_user_error = True

    def __init__(self, message: str, *, options: tuple[str, ...] | list[str] = ()):
        super().__init__(message)
        self.options = tuple(options)


class Stopped(Exception):
    """A run stopped by a signal (SIGTERM from a scheduler or a preempted machine, SIGINT) after
    saving where to resume from. The scripts print it as one line and exit with the status a
    process killed by that signal has (128 + its number: 143 for SIGTERM, 130 for SIGINT)."""
    is_user_error = True

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.exit_code = 128 + signal_number


class Diverged(Exception):
    """A training run whose loss or gradients stopped being finite. Nothing is saved from the
    step it happened at; the scripts print it as one line and exit with status 3 (`options`:
    as `InputError`'s)."""
    is_user_error = True
    exit_code = 3

    def __init__(self, message: str, *, options: tuple[str, ...] = ()):
        super().__init__(message)
        self.options = tuple(options)


class Terminated(BaseException):
    """SIGTERM outside a training loop (which saves a state first, `training.preemption`). A
    BaseException, as KeyboardInterrupt is, so that no `except Exception` on the way (AutoGraph
    converting a function, for one) swallows it; cleanups of what is being written run."""


class SigtermHandler:
    """The scripts' SIGTERM handler (`runner.run` installs a new one per run): raises `Terminated`
    in the script's process, and remembers it (`received`): a signal raised where Python ignores
    exceptions (a GC callback, a `__del__`) is lost, and `stop_if_terminated` raises it again
    before any output is switched in. A forked worker (a pool's) dies as SIGTERM kills."""

    def __init__(self):
        self.pid = os.getpid()
        self.received = False
        self.deferred = 0  # (`sigterm_deferred` blocks around: remember the signal, raise on leaving)

    def __call__(self, signal_number, frame):
        if os.getpid() != self.pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.received = True
        if not self.deferred:
            raise Terminated()


def sigterm_received() -> bool:
    """Whether the script's SIGTERM handler has run in this process."""
    handler = signal.getsignal(signal.SIGTERM)
    return isinstance(handler, SigtermHandler) and handler.received


@contextlib.contextmanager
def sigterm_deferred():
    """Within the block the scripts' SIGTERM handler only remembers a signal; `Terminated` is
    raised on leaving it. For a library call that catches the exceptions met inside it and prints
    their tracebacks (TensorFlow's SavedModel writer traces functions inside `except Exception:
    traceback.print_exc()`, and a `Terminated` met in its tracing can come out as another error),
    so that a stop there ends with the script's one line alone."""
    handler = signal.getsignal(signal.SIGTERM)
    if not isinstance(handler, SigtermHandler):
        yield
        return
    handler.deferred += 1
    try:
        yield
    finally:
        handler.deferred -= 1
    stop_if_terminated()


def stop_if_terminated() -> None:
    """Raises `Terminated` when the script's SIGTERM handler ran earlier: called before a finished
    file or directory replaces its final name, so that nothing new appears after the signal."""
    if sigterm_received():
        raise Terminated()


# The start of the note (`BaseException.add_note`) naming what survives an error that left a
# training loop ("kept: the training state out/training_state/ckpt-20 is intact"), which the
# script's last line repeats.
KEPT_NOTE = "kept: "


def what_survives(error: BaseException) -> str | None:
    """What the error's `KEPT_NOTE` note says survives it, or None."""
    notes = [note for note in getattr(error, "__notes__", ()) if note.startswith(KEPT_NOTE)]
    return notes[-1][len(KEPT_NOTE):] if notes else None
