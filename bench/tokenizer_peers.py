"""Tokenizer throughput on real text: ours (our reference FullTokenizer in one process and in the
create_pretraining_data worker pool, the same without its caches and word-level fast paths, the
tensorflow-text fast path) vs the original `FullTokenizer` itself (tf-models-official's copy,
bench/.venv-tfm) and Hugging Face `tokenizers`' BertWordPieceTokenizer (Rust; bench/.venv-hf), on
People's Daily (Chinese vocab) and English sentences (uncased vocab). Also counts the lines on
which each peer's ids differ from ours.

    python bench/tokenizer_peers.py [--num_workers=2]

Prints a table; writes bench/results/tokenizer_peers.json.
"""

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)
HF_PYTHON = os.path.join(ROOT, "bench", ".venv-hf", "bin", "python")
TFM_PYTHON = os.path.join(ROOT, "bench", ".venv-tfm", "bin", "python")
ORIGINAL = "the original FullTokenizer (tf-models-official's copy)"
VOCABS = {"chinese": os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt"),
          "english": os.path.join(ROOT, "tests", "data", "tokenization", "vocab_en_uncased.txt")}

from common import run_case_process, write_report  # noqa: E402

from bert_realformer.cpus import usable_cpu_count  # noqa: E402


class _NoCache(dict):
    def __setitem__(self, key, value):
        pass


def _rate(lines, tokenize_all):
    start = time.perf_counter()
    result = tokenize_all(lines)
    return len(lines) / (time.perf_counter() - start), result


def tokenizer_throughput(lines, vocab, num_workers=1):
    """{name: lines/s} for our tokenizers on `lines`, and our reference ids (one list per line)."""
    from bert_realformer.pretraining import documents as docs
    from tokenization import FullTokenizer
    from tokenization.fast import FastTokenizer
    from tokenization.reference import BasicTokenizer

    literal = FullTokenizer(vocab)
    literal.basic_tokenizer = BasicTokenizer()  # character by character, like the original
    literal._piece_cache = literal._id_cache = _NoCache()
    reference = FullTokenizer(vocab)
    rates = {}
    rates["ours, character by character, no caches"], _ = _rate(
        lines, lambda ls: [literal.convert_tokens_to_ids(literal.tokenize(line)) for line in ls])
    rates["reference, 1 process"], ids = _rate(lines, lambda ls: [reference.tokenize_to_ids(line) for line in ls])
    if num_workers > 1:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            pool = docs.worker_pool((vocab, True, None), num_workers)
            try:
                rates[f"reference, {num_workers} processes (create_pretraining_data)"], pooled = _rate(
                    lines, lambda ls: [list(a) for a in docs.tokenized_lines([f.name], pool) if a is not None])
            finally:
                pool.terminate()
        assert pooled == ids, "the worker pool changed the ids"
    fast = FastTokenizer(vocab)
    fast.tokenize_to_lists(lines[:100])  # graph warm-up
    rates["fast (tensorflow-text)"], _ = _rate(
        lines, lambda ls: [ids for i in range(0, len(ls), 4096) for ids in fast.tokenize_to_lists(ls[i:i + 4096])])
    return rates, ids


def run_peer(python, script, lines, vocab, work):
    """Runs a tokenizer peer (`bench/peers/SCRIPT` under `python`) on `lines`; returns (its result
    dict, its ids) or (None, None)."""
    lines_file, ids_file = os.path.join(work, "lines.txt"), os.path.join(work, f"{script}.ids.jsonl")
    with open(lines_file, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    result = run_case_process([python, os.path.join(ROOT, "bench", "peers", script), vocab, "1", lines_file,
                               ids_file])
    if result is None:
        return None, None
    with open(ids_file, encoding="utf-8") as f:
        return result, [json.loads(line) for line in f]


def original_tokenizer(lines, vocab, work):
    """The original `FullTokenizer` (tf-models-official's copy): (lines/s, ids) or (None, None)."""
    result, ids = run_peer(TFM_PYTHON, "tfm_tokenizer.py", lines, vocab, work)
    return (result["lines_per_s"], ids) if result else (None, None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_workers", type=int, default=usable_cpu_count())
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "tokenizer_peers.json"))
    args = parser.parse_args()
    for python in (HF_PYTHON, TFM_PYTHON):
        if not os.path.exists(python):
            raise SystemExit(f"{python} is missing: run `make bench-peers` first")
    from bert_realformer import realdata
    corpora = {"chinese": realdata.peoples_daily_lines(split_sentences=True),
               "english": realdata.english_sentences()}
    report = {}
    work = tempfile.mkdtemp(prefix="bench-tok-")
    for language, lines in corpora.items():
        lines = [stripped for stripped in (line.strip() for line in lines) if stripped]
        rates, ours = tokenizer_throughput(lines, VOCABS[language], args.num_workers)
        original_rate, original_ids = original_tokenizer(lines, VOCABS[language], work)
        peer, theirs = run_peer(HF_PYTHON, "hf_tokenizer.py", lines, VOCABS[language], work)
        entry = {"lines": len(lines), "lines_per_s": rates}
        print(f"{language}: {len(lines):,} lines")
        if original_rate is not None:
            rates[ORIGINAL] = original_rate
            entry["original_lines_differing_from_ours"] = sum(a != b for a, b in zip(ours, original_ids))
        if peer is not None:
            rates[f"Hugging Face tokenizers {peer['version']} encode (1 thread)"] = peer["encode_lines_per_s"]
            batch_name = f"Hugging Face tokenizers {peer['version']} encode_batch ({peer['threads']} threads)"
            rates[batch_name] = peer["encode_batch_lines_per_s"]
            differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
            entry["huggingface_lines_differing_from_ours"] = len(differ)
            entry["huggingface_differing_examples"] = [lines[i][:80] for i in differ[:5]]
        for name, rate in rates.items():
            print(f"  {name:<62} {rate:10,.0f} lines/s")
        if original_rate is not None:
            print(f"  the original's ids differ from ours on {entry['original_lines_differing_from_ours']:,} lines")
        if peer is not None:
            print(f"  Hugging Face ids differ from ours on {len(differ):,} of {len(lines):,} lines")
        report[language] = entry
    write_report(args.output, "tokenizer_peers", sys.argv[1:], **report)


if __name__ == "__main__":
    main()
