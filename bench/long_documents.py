"""Long documents: every way run_classifier.py reads a text longer than --max_seq_length, on a real
long-text task with the evidence at the start, in the middle or at the end of each text, over
several seeds, side by side in one run.

The task (`bert_realformer/realdata/long_reviews.py`): a People's Daily article (its first 150
characters) with a product review placed before it, in its middle or after it, labelled with the
review's sentiment; 1,600 training, 400 dev and 700 test documents, balanced, each article and
review used once. The modes:

  head, tail, head_tail     one window per text: --truncation (head is the original's)
  windows, separate         --doc_stride: every window trained with its document's label
                            (predictions pooled by the mean and, from the same model, the max)
  windows, pooled           --doc_stride --window_training=pooled: a document's window logits
                            pooled (mean or max) before the loss, as prediction pools them; auto:
                            trained as max, each dev evaluation choosing max, mean or the first
                            window, the choice going with the best checkpoint

  windows, default          --doc_stride alone (the defaults: separate training, auto pooling)

Every run: a tiny RealFormer from scratch (2 layers, hidden 64, the 21128-token Chinese
vocabulary), --max_seq_length=128 --doc_stride=64 --train_batch_size=16 --learning_rate=1e-3
--num_train_epochs=6, evaluated on the dev set every 100 steps keeping the best checkpoint
(--eval_every_steps=100); the accuracy reported is that checkpoint's on the test set. With
--starts=pretrained, also from a pretrained start: the fine-tuning toolkit's tiny BERT
(bench/finetune_toolkit.py: 4 layers, hidden 64) pretrained here on People's Daily at 128 tokens.
--article_chars takes several lengths, each a set of its own (90, 280 and 500 characters: 2, 5
and 8 windows per document on average).

    python bench/long_documents.py [--seeds=12345,1,2] [--positions=start,middle,end] [--epochs=6]
        [--modes="head;windows, pooled, max"] [--article_chars=90,280,500] [--starts=scratch,pretrained]
        [--output=bench/results/long_documents.json]

Writes bench/results/long_documents.json (every run's test and best dev accuracy).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import TINY_CHINESE_REALFORMER as MODEL  # noqa: E402
from common import VOCAB_ZH, fresh_work_dir, write_report  # noqa: E402
from finetune_toolkit import MODEL as PRETRAINED_MODEL  # noqa: E402
from finetune_toolkit import pretrain  # noqa: E402

SIZES = {"train": 1600, "dev": 400, "test": 700}
ARTICLE_CHARS = 150
FLAGS = ["--max_seq_length=128", "--eval_batch_size=64", "--predict_batch_size=64"]
TRAINING = ["--train_batch_size=16", "--learning_rate=1e-3", "--num_train_epochs=6", "--eval_every_steps=100"]
WINDOWS = ["--doc_stride=64"]
# name -> (training flags, or the name of the run whose model it predicts with; prediction flags)
MODES = {
    "head": (["--truncation=head"], []),
    "tail": (["--truncation=tail"], []),
    "head_tail": (["--truncation=head_tail"], []),
    "windows, separate, mean": ([*WINDOWS, "--window_training=separate", "--window_pooling=mean"], []),
    "windows, separate, max": ("windows, separate, mean", [*WINDOWS, "--window_pooling=max"]),
    "windows, separate, auto": ([*WINDOWS, "--window_training=separate", "--window_pooling=auto"], []),
    "windows, pooled, mean": ([*WINDOWS, "--window_training=pooled", "--window_pooling=mean"], []),
    "windows, pooled, max": ([*WINDOWS, "--window_training=pooled", "--window_pooling=max"], []),
    "windows, pooled, auto": ([*WINDOWS, "--window_training=pooled", "--window_pooling=auto"], []),
    "windows, default": (WINDOWS, []),
}
PRETRAINED_LENGTH = 128  # (the pretrained start's positions: --max_seq_length's)


def write_data(directory, position, article_chars=ARTICLE_CHARS, sizes=SIZES):
    from bert_realformer.realdata.long_reviews import long_review_splits
    os.makedirs(directory)
    labels = {}
    for name, rows in long_review_splits(article_chars, sizes, position=position).items():
        with open(os.path.join(directory, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows))
        labels[name] = [label for label, _ in rows]
    return labels


def document_windows(data, flags):
    """{mean, min, max} windows per training document at the run's --max_seq_length and
    --doc_stride (the tokenizer's count, as run_classifier.py reads the documents)."""
    from tokenization import FullTokenizer
    values = dict(f[2:].split("=", 1) for f in flags if "=" in f)
    tokenizer = FullTokenizer(VOCAB_ZH, do_lower_case=True)
    with open(os.path.join(data, "train.tsv"), encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f.readlines()[1:]]
    room, stride = int(values.get("max_seq_length", 128)) - 2, int(values.get("doc_stride", 64))
    counts = [1 + -(-max(0, len(tokenizer.tokenize(text)) - room) // stride) for text in texts]
    return {"mean": round(statistics.mean(counts), 2), "min": min(counts), "max": max(counts)}


def run_classifier(data, start, out, *flags):
    """`start`: (the config's path, the checkpoint to start from or None)."""
    config, checkpoint = start
    init = [f"--init_checkpoint={checkpoint}"] if checkpoint else []
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic",
                           f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}", *init,
                           f"--output_dir={out}", *flags], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    return proc.stderr


def test_accuracy(out, labels):
    with open(os.path.join(out, "label_list.txt"), encoding="utf-8") as f:
        order = [line.rstrip("\n") for line in f if line.strip()]
    probabilities = np.loadtxt(os.path.join(out, "test_results.tsv"), delimiter="\t", ndmin=2)
    predicted = [order[i] for i in probabilities.argmax(1)]
    return float(np.mean([p == label for p, label in zip(predicted, labels)]))


def chosen(result):
    return f", {result['window_pooling']} pooling" if "window_pooling" in result else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="12345,1,2")
    parser.add_argument("--positions", default="start,middle,end")
    parser.add_argument("--modes", default=";".join(MODES), help="a subset of the modes (separated by ;)")
    parser.add_argument("--epochs", type=float, default=6.0)
    parser.add_argument("--article_chars", default=str(ARTICLE_CHARS),
                        help="the articles' lengths in characters, comma-separated (each a set of its own)")
    parser.add_argument("--sizes", default=",".join(str(SIZES[name]) for name in SIZES),
                        help="train,dev,test documents")
    parser.add_argument("--training", default=" ".join(f for f in TRAINING if not f.startswith("--num_train_epochs")),
                        help="the training flags beside --num_train_epochs")
    parser.add_argument("--starts", default="scratch", help="scratch, pretrained, or both (comma-separated)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "long_documents.json"))
    args = parser.parse_args()
    modes = {name: MODES[name] for name in args.modes.split(";")}
    training_flags = args.training.split() + [f"--num_train_epochs={args.epochs:g}"]
    sizes = dict(zip(SIZES, (int(n) for n in args.sizes.split(","))))
    lengths = [int(n) for n in args.article_chars.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    work, config = fresh_work_dir("long_documents", MODEL)
    starts = {}
    for start in args.starts.split(","):
        if start == "pretrained":
            pretrained_config = os.path.join(work, "pretrained_config.json")
            with open(pretrained_config, "w") as f:
                json.dump({**PRETRAINED_MODEL, "max_position_embeddings": PRETRAINED_LENGTH}, f)
            began = time.time()
            starts[start] = (pretrained_config, pretrain(work, pretrained_config, PRETRAINED_LENGTH))
            print(f"pretrained in {time.time() - began:.0f} s", flush=True)
        else:
            starts[start] = (config, None)
    runs, windows, labels_of = {}, {}, {}
    for length, start, position in ((n, s, p) for n in lengths for s in starts for p in args.positions.split(",")):
        where = "/".join([*([start] if len(starts) > 1 else []), *([str(length)] if len(lengths) > 1 else []),
                          position])  # (the results' key)
        data = os.path.join(work, f"data-{length}-{position}")
        if data not in labels_of:  # (each set written once, for every start)
            labels_of[data] = write_data(data, position, length, sizes)
        labels = labels_of[data]
        windows[where] = document_windows(data, args.training.split() + FLAGS + WINDOWS)
        print(f"{where}: windows per training document: mean {windows[where]['mean']:.1f}, "
              f"{windows[where]['min']}-{windows[where]['max']}", flush=True)
        for seed in seeds:
            for mode, (training, predicting) in modes.items():
                began = time.time()
                if isinstance(training, str):  # another mode's model, predicted otherwise
                    out = os.path.join(work, f"{start}-{length}-{position}-{seed}-{training}")
                    log = run_classifier(data, starts[start], out, "--do_eval", "--do_predict", *predicting, *FLAGS)
                else:
                    out = os.path.join(work, f"{start}-{length}-{position}-{seed}-{mode}")
                    log = run_classifier(data, starts[start], out, "--do_train", "--do_eval", "--do_predict",
                                         f"--seed={seed}", *training, *FLAGS, *training_flags)
                with open(os.path.join(out, "eval_results.txt")) as f:
                    values = dict(line.strip().split(" = ", 1) for line in f)
                result = {"test_accuracy": test_accuracy(out, labels["test"]),
                          "dev_accuracy": float(values["eval_accuracy"]), "best_step": int(values["global_step"]),
                          "seconds": round(time.time() - began, 1), "stuck_warning": "looks stuck" in log}
                if "window_pooling" in values:  # (auto: the reading the dev set chose)
                    result["window_pooling"] = values["window_pooling"]
                runs.setdefault(where, {}).setdefault(mode, {})[seed] = result
                print(f"{where:<7s} seed {seed:>5d} {mode:<24s} test {result['test_accuracy']:.4f}, dev "
                      f"{result['dev_accuracy']:.4f} (step {result['best_step']}{chosen(result)})"
                      f"{', stuck warning' if result['stuck_warning'] else ''}, {result['seconds']} s", flush=True)
        summary = summarise(runs)  # (written after every set: a long run's finished sets are kept)
        write_report(args.output, "long_documents", sys.argv[1:], model=MODEL, sizes=sizes, article_chars=lengths,
                     flags=FLAGS + training_flags, seeds=seeds, starts=list(starts), windows=windows, runs=runs,
                     summary=summary)
    print()
    for where, by_mode in summary.items():
        for mode, s in by_mode.items():
            print(f"{where:<7s} {mode:<24s} test accuracy {s['mean']:.4f} (min {s['min']:.4f}, max {s['max']:.4f})")


def summarise(runs):
    """{set: {mode: test accuracy's mean, min and max over the seeds}}."""
    return {where: {mode: {"mean": statistics.mean(r["test_accuracy"] for r in by_seed.values()),
                           "min": min(r["test_accuracy"] for r in by_seed.values()),
                           "max": max(r["test_accuracy"] for r in by_seed.values())}
                    for mode, by_seed in by_mode.items()} for where, by_mode in runs.items()}

if __name__ == "__main__":
    main()
