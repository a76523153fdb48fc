"""What `--quantize=int8` and `--mixed_precision=bf16` cost in accuracy at prediction on two real
tasks: each fine-tuned model evaluated on its dev set in float32, in int8 and in bf16, over seeds
(and with `--tflite_prediction`, in TensorFlow Lite's float32 and int8).

The set-up is bench/finetune_toolkit.py's: a tiny Chinese BERT (4 layers, hidden 64) pretrained
here on People's Daily, then run_classifier.py on review sentiment (2 classes) and on word_class
(33 classes), with --num_train_epochs=EPOCHS. Each run trains and evaluates in float32; later
processes evaluate the same weights with --quantize=int8 and with --mixed_precision=bf16
(oneDNN's kernels on throughout).

    python bench/int8_accuracy.py [--seeds=1,2,3] [--epochs=4] [--modes=int8,bf16,tflite,tflite-int8] [--tag=T]

Prints per task and seed the accuracies and their changes from float32, then the mean +- standard
deviation of the changes; writes bench/results/int8_accuracy.json (with --tag=T,
int8_accuracy-T.json).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import VOCAB_ZH, fresh_work_dir, write_report  # noqa: E402
from finetune_toolkit import FINETUNING, MODEL, pretrain, write_tasks  # noqa: E402

MODES = {"float32": ["--do_train"], "int8": ["--quantize=int8"], "bf16": ["--mixed_precision=bf16"],
         "tflite": ["--tflite_prediction"], "tflite-int8": ["--tflite_prediction", "--quantize=int8"]}


def evaluate(work, task, seed, checkpoint, config, epochs, mode):
    """{eval_accuracy, eval_loss} of the run for `seed` in `mode` (float32: trains it first)."""
    data, task_flags, _ = task
    out = os.path.join(work, f"run-{os.path.basename(data)}-{seed}")
    finetuning = [flag for flag in FINETUNING if not flag.startswith("--num_train_epochs")]
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), *task_flags,
                           f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
                           f"--init_checkpoint={checkpoint}", f"--output_dir={out}", "--do_eval", *MODES[mode],
                           f"--seed={seed}",
                           *finetuning, f"--num_train_epochs={epochs}"],
                          capture_output=True, text=True, env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"})
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    with open(os.path.join(out, "eval_results.txt")) as f:
        values = dict(line.strip().split(" = ", 1) for line in f)
    return {key: float(values[key]) for key in ("eval_accuracy", "eval_loss")}


def summary(runs, modes):
    """The mean float32 accuracy, and each mode's mean change, its standard deviation and its
    largest loss."""
    runs = list(runs)
    result = {"mean_float32": statistics.mean(r["float32"]["eval_accuracy"] for r in runs)}
    for mode in modes:
        changes = [r[f"{mode}_change"] for r in runs]
        result.update({f"{mode}_mean_change": statistics.mean(changes),
                       f"{mode}_std_change": statistics.stdev(changes) if len(changes) > 1 else 0.0,
                       f"{mode}_largest_loss": -min(changes)})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--epochs", type=float, default=4)
    parser.add_argument("--modes", default="int8,bf16", help=f"compared with float32, of {list(MODES)[1:]}")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    modes = [mode for mode in args.modes.split(",") if mode]
    if not set(modes) <= set(MODES) - {"float32"}:
        parser.error(f"--modes: of {list(MODES)[1:]}")
    work, config = fresh_work_dir("int8_accuracy", MODEL)
    tasks = write_tasks(work)
    started = time.time()
    checkpoint = pretrain(work, config)
    runs, summaries = {}, {}
    for task_name, task in tasks.items():
        for seed in seeds:
            run = {mode: evaluate(work, task, seed, checkpoint, config, args.epochs, mode)
                   for mode in ["float32", *modes]}
            for mode in modes:
                run[f"{mode}_change"] = run[mode]["eval_accuracy"] - run["float32"]["eval_accuracy"]
            runs.setdefault(task_name, {})[seed] = run
            print(f"{task_name:<11s} seed {seed}: " + "  ".join(f"{mode} {run[mode]['eval_accuracy']:.4f}"
                                                                for mode in ["float32", *modes]) +
                  "  changes " + " / ".join(f"{run[f'{mode}_change']:+.4f}" for mode in modes), flush=True)
        summaries[task_name] = summary(runs[task_name].values(), modes)
        print(f"{task_name:<11s} " + "; ".join(f"{key} {value:+.4f}" for key, value in summaries[task_name].items()),
              flush=True)
    name = f"int8_accuracy-{args.tag}" if args.tag else "int8_accuracy"
    write_report(os.path.join(ROOT, "bench", "results", f"{name}.json"), "int8_accuracy", sys.argv[1:],
                 model=MODEL, finetuning=FINETUNING, epochs=args.epochs, runs=runs, summaries=summaries,
                 seconds=round(time.time() - started))


if __name__ == "__main__":
    main()
