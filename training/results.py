"""Writing result files the way the original scripts do."""

from bert_realformer import storage


def write_eval_results(result, path):
    """`key = value` lines sorted by key (the original's eval_results.txt), written atomically."""
    storage.write_atomic(path, "".join(f"{key} = {result[key]}\n" for key in sorted(result)))
