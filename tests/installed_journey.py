"""A user's first journey with the project installed from its wheel (`make test-wheel`), run by
that environment's Python from a directory outside the checkout:

    python tests/installed_journey.py TESTS_DATA_DIR

The console commands exist and answer `--help`; text becomes pretraining records, which train
two steps into a TF1 checkpoint; the packages import from site-packages, and none of the
project's inner packages is a top-level name there. Prints one line per check; exits 1 at the
first that fails."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.dirname(sys.executable)


def check(what, condition, detail=""):
    print(f"{'ok' if condition else 'FAILED'}: {what}" + (f"\n{detail}" if not condition and detail else ""))
    if not condition:
        sys.exit(1)


def command(name, *flags):
    result = subprocess.run([os.path.join(BIN, name), *flags], capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def main(data):
    work = tempfile.mkdtemp(prefix="installed-journey-")
    os.chdir(work)  # outside the checkout: only what was installed can be imported
    try:
        import bert_realformer
        import modeling
        for module in (bert_realformer, modeling):
            check(f"{module.__name__} imports from the installed package", "site-packages" in module.__file__,
                  module.__file__)
        inner = [name for name in ("training", "finetuning", "inference", "tasks", "pretraining", "comparison",
                                   "realdata", "commandline", "analysis", "cli")
                 if importlib.util.find_spec(name) is not None]
        check("no inner package is a top-level name", not inner, str(inner))

        _, output = command("bert-run-pretraining", "--help")
        check("bert-run-pretraining --help lists its flags",  # (absl's --help exits with 1)
          "--bert_config_file" in output and "--save_checkpoints_steps" in output and "Traceback" not in output,
          output[-2000:])
        status, output = command("bert-create-pretraining-data", f"--input_file={data}/pretraining_data/input.txt",
                                 "--output_file=records/train.tfrecord",
                                 f"--vocab_file={data}/tokenization/vocab_en_uncased.txt", "--max_seq_length=64",
                                 "--max_predictions_per_seq=10", "--dupe_factor=1")
        check("bert-create-pretraining-data writes records", status == 0 and os.path.exists("records/train.tfrecord"),
              output[-2000:])
        with open("bert_config.json", "w") as config:
            json.dump({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "intermediate_size": 64, "max_position_embeddings": 64, "residual_attention": "sum"}, config)
        status, output = command("bert-run-pretraining", "--bert_config_file=bert_config.json",
                                 "--input_file=records/train.tfrecord", "--output_dir=out", "--do_train",
                                 "--num_train_steps=2", "--train_batch_size=4", "--max_seq_length=64",
                                 "--max_predictions_per_seq=10")
        check("bert-run-pretraining trains two steps into a TF1 checkpoint",
              status == 0 and os.path.exists("out/model.ckpt-2.index"), output[-2000:])
        status, output = command("bert-run-classifier", "--task_name=nope")
        check("a user mistake is one error line", status == 2 and output.strip().splitlines()[-1].startswith("error: "),
              output[-2000:])
    finally:
        os.chdir("/")
        shutil.rmtree(work)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
