"""A run's exported SavedModel served in a fresh process (where nothing of the run is loaded),
as TF Serving or a user's program would load it."""

import json
import os
import sys

from helpers import script_processes


def serve(export_dir, texts, signature="serving_default"):
    """{output name: list} of `signature` called on raw `texts`, from the one version in
    `export_dir` loaded in a new Python process (only TensorFlow and tensorflow_text imported);
    strings decoded."""
    (version,) = os.listdir(export_dir)
    code = ("import json, sys, tensorflow as tf, tensorflow_text  # registers the tokenizer ops\n"
            f"m = tf.saved_model.load({os.path.join(str(export_dir), version)!r})\n"
            f"out = m.signatures[{signature!r}](text_a=tf.constant(json.loads(sys.stdin.read())))\n"
            "def plain(v): return [plain(x) for x in v] if isinstance(v, list) else "
            "v.decode() if isinstance(v, bytes) else v\n"
            "print(json.dumps({k: plain(v.numpy().tolist()) for k, v in out.items()}))\n")
    loaded = script_processes.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True,
                            text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    return json.loads(loaded.stdout.strip().splitlines()[-1])
