"""A SavedModel's signature called on raw texts, as a serving program would call it: only
TensorFlow and tensorflow_text imported here (tensorflow_text registers the tokenizer ops).

    python tests/helpers/serve_savedmodel.py VERSION_DIR SIGNATURE < texts.json

Prints {output name: list} as JSON (strings decoded).
"""

import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)


def plain(value):
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value.decode() if isinstance(value, bytes) else value


def main(version_dir, signature):
    model = tf.saved_model.load(version_dir)
    outputs = model.signatures[signature](text_a=tf.constant(json.loads(sys.stdin.read())))
    print(json.dumps({name: plain(value.numpy().tolist()) for name, value in outputs.items()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
