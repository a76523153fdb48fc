"""Writing result files the way the original scripts do, and the same numbers to TensorBoard."""

import numbers
import os

from bert_realformer import storage

EVAL_SUMMARIES = "eval"  # OUTPUT_DIR/eval/: TensorBoard's eval curves, beside OUTPUT_DIR/train/


def write_eval_results(result, path, step=None):
    """`key = value` lines sorted by key (the original's eval_results.txt), written atomically;
    the numbers also go to TensorBoard in `eval/` beside the file, at `step` (default: the
    result's `global_step`)."""
    storage.write_atomic(path, "".join(f"{key} = {result[key]}\n" for key in sorted(result)))
    write_eval_summaries(result, os.path.join(os.path.dirname(path), EVAL_SUMMARIES),
                         result.get("global_step", 0) if step is None else step)


def write_eval_summaries(result, directory, step):
    """Every real number of `result` (not `global_step`, the x axis) as a TensorBoard scalar."""
    import tensorflow as tf
    step = int(step)
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=step):
        for key in sorted(result):
            value = result[key]
            if key != "global_step" and isinstance(value, numbers.Real) and not isinstance(value, bool):
                tf.summary.scalar(key, float(value))
    writer.close()
