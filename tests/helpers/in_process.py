"""Running the project's scripts inside this process, one after another, as their command
lines would (for journeys on TensorFlow's in-process `ram://` filesystem).

Each call imports the script afresh (its flags are defined), parses the arguments, runs its
`main` with stderr captured, and then removes the flags it defined, so the next script can
define its own. Errors and stops end as the scripts' runner ends them (`bert_realformer.commandline.runner.run_main`).
"""

import contextlib
import importlib.util
import io
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(script, *argv):
    """(exit status, stderr text) of `python SCRIPT ARGV...` run in this process."""
    completed = completed_in_process(script, *argv)
    return completed.returncode, completed.stderr


def completed_in_process(script, *argv):
    """`subprocess.run([python, SCRIPT, *ARGV], capture_output=True, text=True)`'s result, the
    script run in this process (no interpreter and TensorFlow start-up: for tests of what a
    script computes, not of how its process starts and ends)."""
    from absl import flags

    from bert_realformer.commandline import flag_ranges
    from bert_realformer.commandline.runner import flag_error_line, run_main
    FLAGS = flags.FLAGS
    path = os.path.join(ROOT, script)
    defined_before = set(FLAGS)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        source = os.path.join(ROOT, "bert_realformer", "cli", script)  # (the wrapper's module, loaded afresh)
        spec = importlib.util.spec_from_file_location(f"_in_process_{script[:-3]}", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        flag_ranges.register(skip=defined_before)  # (as the script's entry does, for its own flags)
        try:
            FLAGS([path, *argv])
        except flags.Error as error:  # (as the scripts' own parsing ends)
            return subprocess.CompletedProcess([script, *argv], 2, "", flag_error_line(error) + "\n")
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            try:
                status = run_main(module.main, [path])
            except SystemExit as exit_:
                status = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        for name in set(FLAGS) - defined_before:
            delattr(FLAGS, name)
        FLAGS.unparse_flags()
    return subprocess.CompletedProcess([script, *argv], status, stdout.getvalue(), stderr.getvalue())
