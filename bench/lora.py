"""LoRA against full fine-tuning, side by side in one run, on the fine-tuning toolkit's two real
tasks over seeds (bench/finetune_toolkit.py: the tiny Chinese BERT pretrained here on People's
Daily, then run_classifier.py on review sentiment and on the 33-class word_class task, 2 epochs
at batch 32, sequence 64).

    python bench/lora.py [--seeds=1,2,3] [--rank=8]

Settings: full fine-tuning at the toolkit's rate (1e-3); LoRA of rank R on query and value at the
same rate and at 5x it (low-rank factors usually want a larger rate). Per run: dev accuracy, the
trainable weights (the factors and the head, or every weight), the training's median step time
(from the progress lines, the first loop left out: it traces) and the process's peak resident
memory. Writes bench/results/lora-<cpu>.json.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import VOCAB_ZH, fresh_work_dir, write_report  # noqa: E402
from finetune_stability import FAILURE_MARGIN, summary  # noqa: E402
from finetune_toolkit import FINETUNING, MODEL, pretrain, write_tasks  # noqa: E402

from bert_realformer.cpus import cpu_tag  # noqa: E402

FULL = "full fine-tuning"
STEPS_PER_SECOND = re.compile(r"step \d+/\d+: .*?([\d.]+) steps/s")


def settings(rank):
    return {FULL: [], f"LoRA r={rank} (query, value), lr 1e-3": [f"--lora_rank={rank}"],
            f"LoRA r={rank} (query, value), lr 5e-3": [f"--lora_rank={rank}", "--learning_rate=5e-3"]}


def trainable_weights(extra, num_labels):
    """(trainable, total) weights of the classifier a run with `extra` flags trains."""
    import modeling
    from modeling.lora import count_weights
    model = modeling.BertClassifier(modeling.BertConfig.from_dict(MODEL), num_labels=num_labels)
    model.build()
    rank = next((int(flag.split("=")[1]) for flag in extra if flag.startswith("--lora_rank=")), 0)
    if rank:
        modeling.enable_lora(model, rank)
    return count_weights(model.trainable_variables), count_weights(model.weights)


def run(work, task, seed, extra, checkpoint, config):
    """{eval_accuracy, step_seconds, peak_rss_mib, seconds} of one fine-tuning run."""
    data, task_flags, _ = task
    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    started = time.time()
    command = [sys.executable, os.path.join(ROOT, "run_classifier.py"), *task_flags, f"--data_dir={data}",
               f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}", f"--init_checkpoint={checkpoint}",
               f"--output_dir={out}", "--do_train", "--do_eval", f"--seed={seed}", "--iterations_per_loop=20",
               *FINETUNING, *extra]
    with open(os.path.join(work, "log.txt"), "w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        log.seek(0)
        text = log.read()
    if status:
        sys.exit(text[-3000:])
    with open(os.path.join(out, "eval_results.txt")) as f:
        values = dict(line.strip().split(" = ", 1) for line in f)
    rates = [float(rate) for rate in STEPS_PER_SECOND.findall(text)][1:]
    return {"eval_accuracy": float(values["eval_accuracy"]), "step_seconds": round(1 / statistics.median(rates), 5),
            "peak_rss_mib": round(usage.ru_maxrss / 1024), "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--rank", type=int, default=8)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work, config = fresh_work_dir("lora", MODEL)
    tasks = write_tasks(work)
    started = time.time()
    checkpoint = pretrain(work, config)
    print(f"pretrained {checkpoint} in {time.time() - started:.0f} s", flush=True)
    runs, summaries, weights = {}, {}, {}
    for task_name, task in tasks.items():
        num_labels = round(1 / task[2])
        for name, extra in settings(args.rank).items():
            trainable, total = trainable_weights(extra, num_labels)
            weights.setdefault(task_name, {})[name] = {"trainable": trainable, "total": total}
            results = runs.setdefault(task_name, {}).setdefault(name, {})
            for seed in seeds:
                results[seed] = run(work, task, seed, extra, checkpoint, config)
                print(f"{task_name:<11s} {name:<36s} seed {seed}: {results[seed]}", flush=True)
            summaries.setdefault(task_name, {})[name] = {
                **summary([r["eval_accuracy"] for r in results.values()], task[2] + FAILURE_MARGIN),
                "mean_accuracy": statistics.mean(r["eval_accuracy"] for r in results.values()),
                "std_accuracy": statistics.stdev(r["eval_accuracy"] for r in results.values()) if len(seeds) > 1
                else None,
                "median_step_seconds": statistics.median(r["step_seconds"] for r in results.values()),
                "max_peak_rss_mib": max(r["peak_rss_mib"] for r in results.values()),
                "trainable": trainable, "total": total}
    print()
    for task_name, by_name in summaries.items():
        for name, s in by_name.items():
            print(f"{task_name:<11s} {name:<36s} accuracy {s['mean_accuracy']:.4f} +- {s['std_accuracy'] or 0:.4f}; "
                  f"trainable {s['trainable']:,} of {s['total']:,}; step {1000 * s['median_step_seconds']:.1f} ms; "
                  f"peak {s['max_peak_rss_mib']} MiB")
    write_report(os.path.join(ROOT, "bench", "results", f"lora-{cpu_tag()}.json"), "lora", sys.argv[1:],
                 model=MODEL, finetuning=FINETUNING, settings=settings(args.rank), runs=runs, summaries=summaries,
                 seconds=round(time.time() - started))


if __name__ == "__main__":
    main()
