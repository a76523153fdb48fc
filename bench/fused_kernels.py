"""The prediction graph with and without the fused intermediate product (`inference.fused_kernels`:
the blocks' intermediate product, bias and GELU as one oneDNN kernel), side by side in one
process: the two traced functions (inputs [None, None], as the Predictor traces them) called
alternately, so that the machine's drift hits both alike; medians.

    python bench/fused_kernels.py [--config=base] [--shapes=1x32,1x64,1x128,64x32,64x128] [--calls=200]

Prints ms per call and the fused/plain ratio per shape (batch x tokens); writes
bench/results/fused_kernels-<config>.json. Run with oneDNN on (the default; with
TF_ENABLE_ONEDNN_OPTS=0 TensorFlow has no fused GELU and both graphs are the plain one).
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from common import write_report  # noqa: E402
from model_step import CONFIGS  # noqa: E402

FEATURES = ("input_ids", "input_mask", "token_type_ids")


def traced_forms(model):
    """{"plain": fn, "fused": fn}: the model's pooled output traced without and with the swap."""
    import tensorflow as tf

    from bert_realformer.inference.fused_kernels import FusedKernels
    fused = FusedKernels(model)
    if not fused.blocks:
        raise SystemExit("this TensorFlow does not fuse the GELU (TF_ENABLE_ONEDNN_OPTS=0?)")
    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in FEATURES}
    forms = {}
    for name, context in (("plain", contextlib.nullcontext), ("fused", fused.active)):
        def pooled(features, context=context):
            with context():
                return model(features, training=False)["pooled_output"]
        forms[name] = tf.function(pooled, input_signature=[spec], autograph=False)
    return forms


def alternate(forms, features, calls):
    """{name: median seconds per call} over `calls` calls of each, in alternating order."""
    for form in forms.values():
        form(features).numpy()
    seconds = {name: [] for name in forms}
    order = list(forms.items())
    for index in range(calls):
        for name, form in order if index % 2 else reversed(order):
            start = time.perf_counter()
            form(features).numpy()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="base", choices=sorted(CONFIGS))
    parser.add_argument("--shapes", default="1x32,1x64,1x128,64x32,64x128")
    parser.add_argument("--calls", type=int, default=200,
                        help="calls of each form at batch 1 (larger batches: a twentieth)")
    args = parser.parse_args()
    import numpy as np
    import tensorflow as tf

    import modeling
    config = modeling.BertConfig(vocab_size=21128, **CONFIGS[args.config])
    model = modeling.BertModel(config)
    rng = np.random.default_rng(0)
    rows = []
    forms = None
    for shape in args.shapes.split(","):
        batch, tokens = (int(n) for n in shape.split("x"))
        features = {"input_ids": tf.constant(rng.integers(1, 21128, (batch, tokens)), tf.int32),
                    "input_mask": tf.ones((batch, tokens), tf.int32),
                    "token_type_ids": tf.zeros((batch, tokens), tf.int32)}
        if forms is None:
            model(features)
            forms = traced_forms(model)
        difference = float(np.abs(forms["fused"](features).numpy() - forms["plain"](features).numpy()).max())
        medians = alternate(forms, features, args.calls if batch == 1 else max(4, args.calls // 20))
        row = {"batch_size": batch, "seq_length": tokens, "plain_ms": 1000 * medians["plain"],
               "fused_ms": 1000 * medians["fused"], "fused_over_plain": medians["fused"] / medians["plain"],
               "max_abs_difference": difference}
        rows.append(row)
        print(f"batch {batch:3d} x {tokens:4d} tokens: plain {row['plain_ms']:9.2f} ms, fused {row['fused_ms']:9.2f} "
              f"ms, fused/plain {row['fused_over_plain']:.3f}, outputs differ by {difference:.1e}", flush=True)
    write_report(os.path.join(ROOT, "bench", "results", f"fused_kernels-{args.config}.json"), "fused_kernels",
                 sys.argv[1:], config=args.config, rows=rows)


if __name__ == "__main__":
    main()
