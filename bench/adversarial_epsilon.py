"""Adversarial training's epsilon: FGM and PGD at several sizes of perturbation against no
adversarial training, from scratch and from a pretrained start, over seeds, side by side in one run.

The task: real review sentiment (2,400 training and 600 dev reviews, balanced; majority 0.5).
From scratch: a tiny RealFormer (2 layers, hidden 64, the 21128-token Chinese vocabulary),
`--max_seq_length=96 --train_batch_size=32 --learning_rate=1e-3 --num_train_epochs=2`. From a
pretrained start: the fine-tuning toolkit's tiny BERT pretrained here on People's Daily
(bench/finetune_toolkit.py: 4 layers, hidden 64, 600 steps) with that benchmark's fine-tuning
flags. Each run's dev accuracy after training, and whether the stuck check warned.

    python bench/adversarial_epsilon.py [--seeds=12345,1,2] [--epsilons=0.01,0.003,0.001]
        [--kinds=fgm,pgd] [--starts=scratch,pretrained]

Writes bench/results/adversarial_epsilon.json.
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

from common import TINY_CHINESE_REALFORMER, VOCAB_ZH, fresh_work_dir, write_report  # noqa: E402
from finetune_stability import SIZES  # noqa: E402
from finetune_stability import write_data as write_sentiment  # noqa: E402
from finetune_toolkit import FINETUNING, MODEL, pretrain  # noqa: E402

SCRATCH = ["--max_seq_length=96", "--train_batch_size=32", "--learning_rate=1e-3", "--num_train_epochs=2",
           "--eval_batch_size=64"]
NONE = "none"


def run(work, data, config, checkpoint, flags, seed, extra):
    """{dev accuracy, whether the stuck check warned, seconds} of one fine-tuning run."""
    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    start = time.time()
    init = [f"--init_checkpoint={checkpoint}"] if checkpoint else []
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=thucnews",
                           f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}", *init,
                           f"--output_dir={out}", "--do_train", "--do_eval", f"--seed={seed}", *flags, *extra],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    with open(os.path.join(out, "eval_results.txt")) as f:
        values = dict(line.strip().split(" = ", 1) for line in f)
    return {"eval_accuracy": float(values["eval_accuracy"]), "stuck_warning": "looks stuck" in proc.stderr,
            "seconds": round(time.time() - start, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="12345,1,2")
    parser.add_argument("--epsilons", default="0.01,0.003,0.001")
    parser.add_argument("--kinds", default="fgm,pgd")
    parser.add_argument("--starts", default="scratch,pretrained")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "adversarial_epsilon.json"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = {NONE: []}
    for kind in args.kinds.split(","):
        for epsilon in args.epsilons.split(","):
            settings[f"{kind} {epsilon}"] = [f"--adversarial={kind}", f"--adversarial_epsilon={epsilon}"]
    work, pretrained_config = fresh_work_dir("adversarial_epsilon", MODEL)
    data = os.path.join(work, "sentiment")
    write_sentiment(data)
    scratch_config = os.path.join(work, "scratch_config.json")
    with open(scratch_config, "w") as f:
        json.dump(TINY_CHINESE_REALFORMER, f)
    runs, summary = {}, {}
    for start in args.starts.split(","):
        if start == "pretrained":
            started = time.time()
            setup = (pretrained_config, pretrain(work, pretrained_config), FINETUNING)
            print(f"pretrained in {time.time() - started:.0f} s", flush=True)
        else:
            setup = (scratch_config, None, SCRATCH)
        for name, extra in settings.items():
            for seed in seeds:
                result = run(work, data, setup[0], setup[1], setup[2], seed, extra)
                runs.setdefault(start, {}).setdefault(name, {})[seed] = result
                print(f"{start:<10s} {name:<10s} seed {seed:>5d}: {result['eval_accuracy']:.4f}"
                      f"{' (stuck warning)' if result['stuck_warning'] else ''}, {result['seconds']} s", flush=True)
            accuracies = [r["eval_accuracy"] for r in runs[start][name].values()]
            summary.setdefault(start, {})[name] = {"mean": statistics.mean(accuracies), "min": min(accuracies),
                                                   "max": max(accuracies)}
    write_report(args.output, "adversarial_epsilon", sys.argv[1:], scratch_model=TINY_CHINESE_REALFORMER,
                 pretrained_model=MODEL, scratch_flags=SCRATCH, pretrained_flags=FINETUNING, sizes=SIZES, seeds=seeds,
                 runs=runs, summary=summary)


if __name__ == "__main__":
    main()
