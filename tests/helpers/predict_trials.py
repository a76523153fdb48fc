"""Predicts the same dev examples TRIALS times into one output directory, as evaluation runs do,
with one --max_seq_length; prints one JSON line: each trial's probabilities, rounded.

    python predict_trials.py OUT_DIR CHECKPOINT VOCAB CONFIG MAX_SEQ_LENGTH TRIALS

Two of these started together on one OUT_DIR with other lengths are two evaluation runs that
share a directory (they do not claim it): each must get its own features every time."""

import json
import os
import sys

from bert_realformer.checkpoints.config_files import read_config

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tensorflow as tf  # noqa: E402

import modeling  # noqa: E402
from bert_realformer.tasks.classification import task  # noqa: E402
from bert_realformer.tasks.classification.reading import InputExample  # noqa: E402
from bert_realformer.training.driver import Driver, RunOptions  # noqa: E402
from tokenization import FullTokenizer  # noqa: E402

WORDS = ["good", "bad", "film", "plot", "long", "short", "story", "music", "actor", "scene"]


def examples():
    rows = []
    for i in range(40):
        text = " ".join(WORDS[(i * k + 3) % len(WORDS)] for k in range(1, 4 + i % 9))
        rows.append(InputExample(f"dev-{i}", text, None, str(i % 2), f"dev.tsv:{i + 1}"))
    return rows


def main():
    out, checkpoint, vocab, config_file, max_seq_length, trials = sys.argv[1:]
    config = read_config(config_file)
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, 2),
                    RunOptions(seed_globally=True, output_dir=out, init_checkpoint=checkpoint))
    driver.restore_for_inference()
    tokenizer = FullTokenizer(vocab)
    results = []
    for _ in range(int(trials)):
        probabilities, _ = task.predict(driver, examples(), ["0", "1"], tokenizer, os.path.join(out, "eval.tf_record"),
                                        8, int(max_seq_length))
        results.append([[round(float(p), 5) for p in row] for row in probabilities])
    print(json.dumps(results))


if __name__ == "__main__":
    main()
