"""Hugging Face `tokenizers` BertWordPieceTokenizer throughput, run in bench/.venv-hf.

    python hf_tokenizer.py VOCAB LOWER(0|1) LINES_FILE IDS_OUT

Reads one line per text, times `encode` line by line (one thread) and `encode_batch` (its own
thread pool, all cores), writes the ids (JSON lists, one per line) to IDS_OUT for the caller's
agreement check, and prints `RESULT {json}` with lines/s.
"""

import json
import os
import sys
import time


def main():
    vocab, lower, lines_file, ids_out = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
    import tokenizers
    from tokenizers.implementations import BertWordPieceTokenizer
    with open(lines_file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    tokenizer = BertWordPieceTokenizer(vocab, lowercase=lower, clean_text=True,
                                       handle_chinese_chars=True, strip_accents=None)
    tokenizer.encode_batch(lines[:100], add_special_tokens=False)  # warm-up
    start = time.perf_counter()
    single = [tokenizer.encode(line, add_special_tokens=False).ids for line in lines]
    single_rate = len(lines) / (time.perf_counter() - start)
    start = time.perf_counter()
    batched = [e.ids for e in tokenizer.encode_batch(lines, add_special_tokens=False)]
    batch_rate = len(lines) / (time.perf_counter() - start)
    assert batched == single
    with open(ids_out, "w") as f:
        for ids in single:
            f.write(json.dumps(ids) + "\n")
    print("RESULT " + json.dumps({"version": tokenizers.__version__, "threads": os.cpu_count(),
                                  "encode_lines_per_s": single_rate,
                                  "encode_batch_lines_per_s": batch_rate}), flush=True)


if __name__ == "__main__":
    main()
