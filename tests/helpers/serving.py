"""A run's exported SavedModel served in another process than the run's, as TF Serving or a
user's program would load it (`serve_savedmodel.py`)."""

import json
import os
import subprocess
import sys

from helpers import script_processes

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_savedmodel.py")


def serve(export_dir, texts, signature="serving_default", fresh_interpreter=False, env=None):
    """{output name: list} of `signature` called on raw `texts`, from the one version in
    `export_dir`, loaded in a new process: forked from the test process's script server (which
    has imported the project, but holds nothing of the run), or with `fresh_interpreter` a
    Python started afresh where only TensorFlow and tensorflow_text are imported (that the
    SavedModel needs nothing of the project); `env`: its environment (default the test's)."""
    (version,) = os.listdir(export_dir)
    command = [sys.executable, SERVER, os.path.join(str(export_dir), version), signature]
    start = subprocess.run if fresh_interpreter else script_processes.run
    loaded = start(command, input=json.dumps(texts), capture_output=True, text=True, timeout=300, env=env)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    return json.loads(loaded.stdout.strip().splitlines()[-1])
