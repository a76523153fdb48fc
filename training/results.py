"""Writing result files the way the original scripts do."""

import os


def write_eval_results(result, path):
    """`key = value` lines sorted by key (the original's eval_results.txt), written atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for key in sorted(result):
            f.write(f"{key} = {result[key]}\n")
    os.replace(tmp, path)
