"""TensorFlow's start-up lines kept off a script's console. Importing TensorFlow 2.21 prints a
block from its native libraries straight to the process's stderr, twice (two libraries each
start their own logging), whatever `TF_CPP_MIN_LOG_LEVEL` says:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:... port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.

`hide_while_importing_tensorflow()` catches file descriptor 2 while `tensorflow` is imported
and writes back every line but those (a real error, a Python warning, keep their place); the
scripts do so unless the user asked for TensorFlow's log (`--verbosity`, or
`TF_CPP_MIN_LOG_LEVEL` 0 or 1).
"""

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# The lines of the start-up block: absl's note, an INFO line of TensorFlow's native code, CUDA's
# failed start on a machine without a GPU driver, and the CPU-instructions note's second line.
STARTUP_LINE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                          r"|I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+\.cc:\d+\] .*"
                          r"|E\d{4} \d\d:\d\d:\d+\.\d+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: .*"
                          r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate "
                          r"compiler flags\.")


def hide_while_importing_tensorflow() -> None:
    """From now on, the first `import tensorflow` of the process leaves its start-up lines out
    (the module docstring). Does nothing once TensorFlow is imported."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


class _QuietImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as Python would, with its module's execution wrapped in `_filtered_stderr`;
    leaves `sys.meta_path` at its first use."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            execute = spec.loader.exec_module

            def exec_module(module):
                with _filtered_stderr():
                    execute(module)
                    # CUDA starts when TensorFlow first lists its devices, which may come later and
                    # print there; listing them (which leaves them configurable) starts it here.
                    module.config.list_physical_devices()
            spec.loader.exec_module = exec_module
        return spec


@contextlib.contextmanager
def _filtered_stderr() -> Iterator[None]:
    """Inside the block, file descriptor 2 goes to a temporary file; after it, its lines except
    the start-up block's go to stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode("utf-8", errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not STARTUP_LINE.fullmatch(line.rstrip("\n"))))
            sys.stderr.flush()
