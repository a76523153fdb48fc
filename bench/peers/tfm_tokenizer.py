"""The original BERT `FullTokenizer`, as copied into tf-models-official
(`official.nlp.tools.tokenization`), timed on one process; run in bench/.venv-tfm.

    python tfm_tokenizer.py VOCAB LOWER(0|1) LINES_FILE IDS_OUT

Reads one line per text, times `convert_tokens_to_ids(tokenize(line))` line by line, writes the
ids (JSON lists, one per line) to IDS_OUT for the caller's agreement check, and prints
`RESULT {json}` with lines/s.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    vocab, lower, lines_file, ids_out = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
    from official.nlp.tools import tokenization
    with open(lines_file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    start = time.perf_counter()
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]
    rate = len(lines) / (time.perf_counter() - start)
    with open(ids_out, "w") as f:
        for row in ids:
            f.write(json.dumps(row) + "\n")
    print("RESULT " + json.dumps({"lines_per_s": rate}), flush=True)


if __name__ == "__main__":
    main()
