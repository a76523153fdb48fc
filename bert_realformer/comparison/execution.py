"""Running a study's processes: each command printed as a user would type it, its output
written to its directory's `log.txt` as it comes (a killed study leaves the log of the run it
killed) with its progress lines (step, rate, ETA) shown on the study's output, finished runs
re-used and unfinished ones resumed (the scripts resume from their training state when run
again with the same command).

A run directory records the command that made it (`command.txt`); running the study again
with flags that change a run's command stops with the first difference, rather than mixing two
studies' results.
"""

import json
import os
import subprocess
import sys
import time

from bert_realformer import console, storage
from bert_realformer.comparison.plan import Run, StudyPlan, python_command, shown
from bert_realformer.comparison.study_progress import StudyProgress
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

COMMAND_FILE = "command.txt"
LOG_FILE = "log.txt"


class RunFailed(Exception):
    """A run of the study exited non-zero; the message names it and ends with its log's tail."""


def _check_recorded_command(run: Run) -> None:
    path = os.path.join(run.directory, COMMAND_FILE)
    wanted = list(run.command)
    if not storage.exists(path):
        storage.makedirs(run.directory)
        storage.write_atomic(path, "\n".join(wanted) + "\n")
        return
    recorded = read_text(path).splitlines()
    if recorded != wanted:
        changed = next((f"{a!r} (recorded: {b!r})" for a, b in zip(wanted, recorded) if a != b),
                       f"{len(wanted)} arguments (recorded: {len(recorded)})")
        raise InputError(f"{run.directory} holds a run made with other flags: now {changed}; "
                         "use another output_dir for a different study", options=("output_dir",))


def execute(run: Run, stream=None) -> bool:
    """Runs `run` unless it has finished; True when it ran. Raises `RunFailed`."""
    stream = stream or sys.stdout
    _check_recorded_command(run)
    if storage.exists(run.done_marker):
        console.say(f"[{run.name}] done already", stream)
        return False
    console.say(f"[{run.name}] {shown(run.command)}", stream)
    started = time.time()
    log = os.path.join(run.directory, LOG_FILE)
    returncode, output = _streamed(run, log, stream)
    if returncode:
        errors = [line for line in output if line.startswith("error:")]
        reason = errors[-1] if errors else (output[-1] if output else "no output")
        raise RunFailed(f"[{run.name}] failed (exit {returncode}): {reason} (log: {log})")
    console.say(f"[{run.name}] finished in {time.time() - started:.0f} s", stream)
    return True


def _streamed(run: Run, log: str, stream) -> tuple[int, list[str]]:
    """Runs `run`, its output written to `log` line by line as it comes and its progress lines
    (`step N/M: ...`) echoed to `stream` under the run's name. Returns (exit status, the last
    lines of its output)."""
    tail: list[str] = []
    with storage.open_file(log, "w") as log_file:
        proc = subprocess.Popen(python_command(run.command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        try:
            for line in proc.stdout:
                log_file.write(line)
                log_file.flush()
                line = line.rstrip("\n")
                tail = (tail + [line])[-50:]
                if line.startswith("step "):
                    console.say(f"[{run.name}] {line}", stream)
        finally:
            if proc.poll() is None:  # (the study itself was stopped)
                proc.terminate()
            log_file.write(proc.stdout.read())  # its last words (a stopped run says what it kept)
            proc.wait()
    return proc.returncode, [line for line in tail if line.strip()]


def write_configs(plan: StudyPlan) -> None:
    """Each variant's config, the base config with the variant's keys (`released`: as it is)."""
    for variant in plan.compared:
        path = plan.config_path(variant)
        text = json.dumps(plan.config(variant), indent=2, sort_keys=True) + "\n"
        if not storage.exists(path) or read_text(path) != text:
            storage.makedirs(os.path.dirname(path))
            storage.write_atomic(path, text)


def execute_plan(plan: StudyPlan, stream=None) -> int:
    """Runs every run of the plan in order, each announced with the study's progress
    (`StudyProgress`); returns how many ran (the rest were done)."""
    stream = stream or sys.stdout  # (where `execute` prints each run's command)
    write_configs(plan)
    runs = plan.runs()
    to_do = [not storage.exists(run.done_marker) for run in runs]
    progress = StudyProgress([run.kind for run in runs])
    ran = 0
    for index, run in enumerate(runs):
        if to_do[index]:
            console.say(progress.line(index, run.name, to_do), stream)
        started = time.monotonic()
        if execute(run, stream):
            progress.finished(run.kind, time.monotonic() - started)
            ran += 1
        to_do[index] = False
    return ran
