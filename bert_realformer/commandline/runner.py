"""How every command-line script runs: user mistakes end in one line, not a traceback.

    from bert_realformer.commandline.runner import script_entry
    ...
    entry = script_entry(main, __doc__)  # what the console command and the wrapper call

    if __name__ == "__main__":
        entry()

A flag that does not parse is such a mistake too. An exception class with
`is_user_error = True` (`bert_realformer.errors.InputError` and its subclasses, e.g.
`modeling.ConfigError`; `bert_realformer.errors.Stopped` and `.Diverged`) is such an
ending: `run` prints `error: <message>` and exits 2 (or the error's `exit_code`). Whatever way the
script ends, the output directories its run claimed are released (`bert_realformer.run_claim`).
`run` also quiets TensorFlow's log (`TF_CPP_MIN_LOG_LEVEL` 2 unless the user set it) and the block
its native libraries print as it is imported (`startup_lines`; unless asked for), and turns
on oneDNN's kernels where TensorFlow would leave them off (`cpu_kernels`) before `main` imports
TensorFlow, and quiets absl's INFO lines (unless `--verbosity` is given).
"""

import contextlib
import errno
import json
import os
import re
import signal
import sys

from absl import app, flags, logging

from bert_realformer import console, cpu_kernels, startup_lines
from bert_realformer.errors import SigtermHandler, Terminated, sigterm_received, stop_if_terminated, what_survives


def run_main(main, argv) -> int:
    """`main(argv)` with the scripts' endings: 0, or the status a user error or stop ends with
    (after printing its one line, an output directory the run made and left empty removed);
    other exceptions propagate."""
    absent = _absent_output_dirs()
    status = _ending_of(main, argv)
    if status:
        _remove_empty(absent)
    return status


def _ending_of(main, argv) -> int:
    try:
        status = main(argv) or 0
        stop_if_terminated()  # (raised where Python ignores exceptions, e.g. a GC callback)
        return status
    except KeyboardInterrupt:
        console.say(f"error: interrupted (SIGINT); {INTACT}")
        return 128 + signal.SIGINT
    except (Terminated, Exception) as error:
        # After a SIGTERM, any error is the signal's: its exception met inside a library that
        # turned it into another (TensorFlow tracing a function, where a shape came back None).
        if isinstance(error, Terminated) or sigterm_received():
            console.say(f"error: stopped by SIGTERM; {INTACT}")
            return 128 + signal.SIGTERM
        if getattr(type(error), "is_user_error", False):
            console.say(f"error: {as_flags(error)}")
            return getattr(error, "exit_code", 2)
        ending = _system_ending(error)
        if ending is None:
            raise
        then = " after freeing space" if ending[1] == DISK_FULL_STATUS else ""
        console.say(f"error: {ending[0]}; {_intact(error)}{then}")
        return ending[1]


def as_flags(error: BaseException) -> str:
    """The error's message with the options it names (`InputError.options`) written as the
    flags that set them: `max_seq_length=8: ...` -> `--max_seq_length=8: ...`."""
    message = str(error)
    for option in getattr(error, "options", ()):
        message = re.sub(rf"(?<![\w-]){re.escape(option)}(?!\w)", f"--{option}", message)
    return message


DISK_FULL_STATUS = 4
INTACT = "the files being written were removed and finished ones kept: run the same command again"


def _intact(error: BaseException) -> str:
    """What survives `error`: INTACT, naming the training state when a training loop ended
    (the driver notes it on what leaves it: `errors.what_survives`)."""
    kept = what_survives(error)
    return f"the files being written were removed and {kept}: run the same command again" if kept else INTACT


def _quiet_about_terminated(unraisable) -> None:
    """`sys.unraisablehook`: a SIGTERM met where Python ignores exceptions (a GC callback, a
    `__del__`) prints no traceback; the script ends with its one line when `main` returns."""
    if not isinstance(unraisable.exc_value, Terminated):
        sys.__unraisablehook__(unraisable)


OUT_OF_MEMORY_STATUS = 5
LOST_WORKER_STATUS = 6
PERMISSION_STATUS = 7


def _first_line(error: BaseException, preferring: str = "") -> str:
    """The error's message's first line, or its first line holding `preferring` (TensorFlow's
    messages start with "Graph execution error:")."""
    lines = (getattr(error, "message", None) or str(error)).strip().splitlines()
    chosen = [line for line in lines if preferring and preferring in line] or lines or [type(error).__name__]
    return chosen[0].strip()[:300]


def _system_ending(error: BaseException) -> tuple[str, int] | None:
    """(one line, status) for what the machine, not the user's input, ended: a full disk,
    memory, a lost peer, a permission; None for anything else (a bug: its traceback is wanted)."""
    kind = type(error).__name__
    if _is_disk_full(error):
        where = f" writing {error.filename}" if getattr(error, "filename", None) else ""
        return f"no space left on the device{where}", DISK_FULL_STATUS
    if kind == "ResourceExhaustedError" or "out of memory" in str(error).lower():
        return (f"out of memory ({_first_line(error, 'OOM when allocating')}): the batch is too large for this "
                "device; use a smaller --train_batch_size (with --gradient_accumulation_steps for the same update) or "
                "--predict_batch_size / --eval_batch_size", OUT_OF_MEMORY_STATUS)
    if kind in ("UnavailableError", "DeadlineExceededError") or "Socket closed" in str(error):
        return (f"lost contact with another worker ({_lost_workers(error)}): restart every worker with the same "
                "command (they resume from their training states)", LOST_WORKER_STATUS)
    if isinstance(error, OSError) and error.errno == errno.EROFS:
        where = f"{error.filename} " if error.filename else ""
        return f"{where}cannot be written: read-only file system", PERMISSION_STATUS
    if isinstance(error, PermissionError):
        where = f" to {error.filename}" if error.filename else ""
        return f"permission denied{where}: {error.strerror or _first_line(error)}", PERMISSION_STATUS
    return None


def _lost_workers(error: BaseException) -> str:
    """Who TensorFlow's collective error names as gone and why ("worker 1 stopped sending
    heartbeats", "worker 1: recvmsg:Connection reset by peer"), else the message's first line."""
    text = getattr(error, "message", None) or str(error)
    cause = text.split("Collective ops is aborted by:", 1)[-1]
    this = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    tasks = [task for task in dict.fromkeys(re.findall(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)", cause))
             if task != (this.get("type"), str(this.get("index")))]
    if not tasks:
        return _first_line(error)
    who = ", ".join(f"{job} {index}" for job, index in tasks)
    if "stopped sending heartbeats" in cause:
        return f"{who} stopped sending heartbeats"
    reason = cause.strip().splitlines()[0].strip()
    return f"{who}: {reason[:200]}"


def _is_disk_full(error: BaseException) -> bool:
    """Python's ENOSPC/EDQUOT, or TensorFlow's error for the same (its message says so)."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(error)


def script_entry(main, usage: str | None):
    """The function a script's command runs: `run(main)`, with `usage` (the script's docstring)
    as what `--help` prints first, whatever module started it (the repository's wrapper, an
    installed console command, `python -m`)."""
    def entry() -> None:
        from bert_realformer.commandline import flag_ranges
        sys.modules["__main__"].__doc__ = usage
        flag_ranges.register()
        for flag in flags.FLAGS.get_key_flags_for_module(main.__module__):  # (--help lists the main module's)
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
        run(main, script_module=main.__module__)
    return entry


def run(main, script_module: str | None = None):
    """`absl.app.run(main)`, printing `error: <message>` and exiting 2 on a user mistake; with
    `script_module` (the script's), `--help` prints its flags in groups (`help_text`)."""
    tensorflow_log_asked = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") in ("0", "1")  # its INFO or WARNING lines
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cpu_kernels.turn_on_onednn(os.environ)

    def guarded(argv):
        plain = not flags.FLAGS["verbosity"].present  # TensorFlow's INFO chatter off by default
        if plain:
            logging.set_verbosity(logging.WARNING)
            if not tensorflow_log_asked:
                startup_lines.hide_while_importing_tensorflow()
        signal.signal(signal.SIGTERM, SigtermHandler())  # (a new one per run: nothing received yet)
        sys.unraisablehook = _quiet_about_terminated
        with console.plain_warnings() if plain else contextlib.nullcontext():
            status = run_main(main, argv)
        # The work is done, or ended with its line: a stop now would only cut the exit short
        # (a traceback from an exit handler, a status that belies finished outputs).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if status:
            sys.exit(status)
    app.run(guarded, flags_parser=lambda argv: _parse_flags(argv, script_module))


OUTPUT_DIR_FLAGS = ("output_dir", "export_dir")


def _absent_output_dirs() -> list[str]:
    """The output directories the flags name (`OUTPUT_DIR_FLAGS`) that do not exist yet."""
    from bert_realformer import storage
    named = (flags.FLAGS[name].value for name in OUTPUT_DIR_FLAGS if name in flags.FLAGS)
    return [path for path in named if path and not storage.exists(path)]


def _remove_empty(directories: list[str]) -> None:
    """Removes those of `directories` that are empty: a run that ends in an error leaves no empty
    directory it made (checking that one is writable makes it; a refusal after the data was read
    empties it, `finetuning.flow`)."""
    from bert_realformer import storage
    for path in directories:
        if storage.isdir(path) and not storage.listdir(path):
            storage.rmtree(path)


def require_flags(*names: str) -> None:
    """absl's `mark_flags_as_required` (call where the flags are defined): a missing one ends
    the script as `error: --NAME is required`."""
    flags.mark_flags_as_required(names)


def flag_error_line(error: Exception) -> str:
    """The one line a flag that does not parse or validate ends with: a value out of its range
    before a required flag left out (absl reports every failed check, one per line)."""
    lines = str(error).splitlines() or [str(error)]
    wrong = [line for line in lines if "must have a value other than None" not in line]
    if wrong:
        return f"error: {wrong[0]} (see --help)"
    missing = re.search(r"Flag --(\w+) must have a value other than None", lines[0])
    return f"error: --{missing.group(1)} is required"


# absl's help flags: each prints the usage and exits with status 1, as if the command had failed.
HELP_FLAGS = ("-?", "-h", "-help", "--help", "--helpshort", "--helpfull", "--helpxml")
GROUPED_HELP_FLAGS = HELP_FLAGS[:5]  # (--helpfull and --helpxml: absl's own)


def _parse_flags(argv, script_module=None):
    """absl's flag parsing, with a bad flag ending as every user mistake does: one `error:`
    line and status 2; the usage asked for (`HELP_FLAGS`) ends with status 0, a script's
    `--help` listing its flags in groups (`help_text`)."""
    if script_module and any(arg.split("=", 1)[0] in GROUPED_HELP_FLAGS for arg in argv[1:]):
        from bert_realformer.commandline.help_text import help_text
        print(help_text(script_module, sys.modules["__main__"].__doc__))
        sys.exit(0)
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        console.say(flag_error_line(error))
        sys.exit(2)
    except SystemExit as stop:
        if stop.code == 1 and any(arg.split("=", 1)[0] in HELP_FLAGS for arg in argv[1:]):
            sys.exit(0)
        raise
