"""Long documents: run_classifier.py truncating at --max_seq_length (the original) vs
--doc_stride windows combined per document, on a real long-text task whose label sits at the
end of each text (`bert_realformer/realdata/long_reviews.py`: a People's Daily article followed by a review,
labelled with the review's sentiment). Both from the same small randomly initialised model,
same flags otherwise, side by side in one run.

    python bench/long_documents.py [--max_seq_length=128] [--doc_stride=64] [--epochs=3]

Prints dev accuracy and time per variant; writes bench/results/long_documents.json.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import write_report  # noqa: E402

VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
MODEL = {"vocab_size": 21128, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 256, "max_position_embeddings": 512, "type_vocab_size": 2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--doc_stride", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--article_chars", type=int, default=400)
    args = parser.parse_args()
    from bert_realformer.realdata.long_reviews import long_review_splits
    work = os.path.join(ROOT, "bench", ".work", "long_documents")
    shutil.rmtree(work, ignore_errors=True)
    data = os.path.join(work, "data")
    os.makedirs(data)
    splits = long_review_splits(args.article_chars)
    for name, rows in splits.items():
        with open(os.path.join(data, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows))
    config = os.path.join(work, "bert_config.json")
    with open(config, "w") as f:
        json.dump(MODEL, f)
    results = {}
    windows = [f"--doc_stride={args.doc_stride}"]
    # (name, flags, output directory): the max-pooling row evaluates the windows run's model again.
    variants = (("truncated", ["--do_train"], "truncated"),
                ("windows, mean pooling", ["--do_train", *windows], "windows"),
                ("windows, max pooling", [*windows, "--window_pooling=max"], "windows"))
    for name, extra, directory in variants:
        start = time.time()
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=generic",
                               f"--data_dir={data}", f"--vocab_file={VOCAB_ZH}", f"--bert_config_file={config}",
                               f"--output_dir={work}/{directory}", "--do_eval",
                               f"--max_seq_length={args.max_seq_length}", "--train_batch_size=32",
                               "--learning_rate=3e-4", f"--num_train_epochs={args.epochs}", *extra],
                              capture_output=True, text=True)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        with open(os.path.join(work, directory, "eval_results.txt")) as f:
            values = dict(line.strip().split(" = ", 1) for line in f)
        results[name] = {"eval_accuracy": float(values["eval_accuracy"]), "macro_f1": float(values["macro_f1"]),
                         "steps": int(values["global_step"]), "seconds": round(time.time() - start, 1)}
        print(f"{name:<22s} dev accuracy {results[name]['eval_accuracy']:.4f}, macro-F1 "
              f"{results[name]['macro_f1']:.4f}, {results[name]['steps']} steps, {results[name]['seconds']} s",
              flush=True)
    lengths = [len(text) for _, text in splits["train"]]
    write_report(os.path.join(ROOT, "bench", "results", "long_documents.json"), "long_documents", sys.argv[1:],
                 model=MODEL, sizes={k: len(v) for k, v in splits.items()},
                 mean_characters=sum(lengths) / len(lengths), results=results)


if __name__ == "__main__":
    main()
