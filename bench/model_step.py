"""Train-step throughput and peak memory of the model, per variant, side by side.

Each case (variant x XLA on/off) runs in its own subprocess so that its peak memory is its own;
all cases of one invocation run back to back on the same machine. A step is forward + backward
of the MLM+NSP pretraining loss plus an SGD update.

    python bench/model_step.py --config=small --seq_length=128,512 --batch_size=8
    KERAS_BACKEND=jax python bench/model_step.py --config=large --dtype_policy=mixed_bfloat16 \
        --seq_length=128,512 --batch_size=64 --peak_matmul_size=8192 --pytorch_python=python3

With `--max_batch`, each variant's largest batch that fits (a multiple of `--batch_multiple`) is
searched from `--batch_size` instead, every probe a whole case; the largest fitting case is
marked `"largest_fitting_batch": true` in the JSON.

Prints a table and writes JSON to bench/results/model_step-<backend>-<config>.json.
"""

import argparse
import functools
import json
import os
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from batch_search import largest_fitting_batch  # noqa: E402
from common import emit_result, emit_result_or_out_of_memory, run_case_process, write_report  # noqa: E402
from tf_step import sgd_step  # noqa: E402

VOCAB_SIZE = 30522
CONFIGS = {  # Google's released shapes (BERT-Tiny/Small/Base/Large)
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "demo": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512),  # make demo
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
VARIANTS = {
    "post-LN": dict(layer_norm_type="post", residual_attention="none"),
    "pre-LN": dict(layer_norm_type="pre", residual_attention="none"),
    "RealFormer-sum": dict(layer_norm_type="post", residual_attention="sum"),
    "RealFormer-mean": dict(layer_norm_type="post", residual_attention="mean"),
}


def train_flops_per_step(shape, batch, seq, predictions, vocab=VOCAB_SIZE):
    """Model FLOPs of one pretraining step: 3x the forward pass's matmul FLOPs (backward is
    twice the forward), counting multiply-adds as 2 and nothing else (the MFU convention).

    Per layer and token: Q, K, V, output projections 4H^2 and the FFN 2HI weights, plus QK^T
    and probs x V, 2SH; per masked prediction: the MLM transform H^2 and the tied decoder HV;
    per sequence: the pooler H^2 and NSP 2H.
    """
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    per_token = layers * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq * h)
    forward = batch * seq * per_token + batch * predictions * 2 * (h * h + h * vocab) \
        + batch * 2 * (h * h + 2 * h)
    return 3 * forward


def predictions_per_seq(seq):
    """`max_predictions_per_seq`: the original's 20 at seq 128, else 15% of the sequence."""
    return 20 if seq == 128 else max(1, round(seq * 0.15))


def measure_matmul_peak_tflops(dtype, size, repeats=20):
    """TFLOP/s of a size x size x size matmul in `dtype` on this backend's default device (the
    denominator of MFU: what this machine can actually do, not its data sheet)."""
    import keras
    if keras.backend.backend() == "jax":
        import jax
        import jax.numpy as jnp
        a = jax.random.normal(jax.random.PRNGKey(0), (size, size), jnp.float32).astype(dtype)
        matmul = jax.jit(lambda x, y: x @ y)
        wait = lambda x: x.block_until_ready()  # noqa: E731
    else:
        import tensorflow as tf
        a = tf.cast(tf.random.normal((size, size)), dtype)
        matmul = tf.function(lambda x, y: tf.matmul(x, y), jit_compile=True)
        wait = lambda x: x.numpy()  # noqa: E731
    for _ in range(3):
        wait(matmul(a, a))
    start = time.perf_counter()
    for _ in range(repeats):
        out = matmul(a, a)
    wait(out)
    return 2 * size ** 3 * repeats / (time.perf_counter() - start) / 1e12


def _features(batch, seq, predictions, vocab):
    import numpy as np
    rng = np.random.RandomState(0)
    return {
        "input_ids": rng.randint(0, vocab, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq)[None, :] >= seq // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": rng.randint(0, seq, (batch, predictions)).astype("int32"),
        "masked_lm_ids": rng.randint(0, vocab, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.randint(0, 2, (batch, 1)).astype("int32"),
    }


def _tf_step(model, xla):
    import modeling
    step = sgd_step(lambda features: modeling.pretraining_losses(
        model(features, training=True), features)["total_loss"], model.trainable_variables, xla)
    return lambda features: float(step(features))


def _jax_step(model):
    step, state = jax_train_step(model)

    def run(features):
        loss, state["t"], state["n"] = step(state["t"], state["n"], features)
        return float(loss)

    return run


def jax_train_step(model, learning_rate=1e-4):
    """The JAX train step: `(step, state)` where the jitted `step(trainable, non_trainable,
    features)` returns `(loss, trainable, non_trainable)` with the weights' buffers donated (as
    a real trainer updates them in place), and `state` holds the current `{"t", "n"}` values."""
    import jax

    import modeling

    def loss_fn(trainable, non_trainable, features):
        out, non_trainable = model.stateless_call(trainable, non_trainable, features, training=True)
        return modeling.pretraining_losses(out, features)["total_loss"], non_trainable

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(trainable, non_trainable, features):
        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable, features)
        trainable = [w - learning_rate * g.astype(w.dtype) for w, g in zip(trainable, grads)]
        return loss, trainable, non_trainable

    state = {"t": [v.value for v in model.trainable_variables],
             "n": [v.value for v in model.non_trainable_variables]}
    return step, state


def _peak_memory_mb():
    import keras
    if keras.backend.backend() == "jax":
        import jax
        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            return stats["peak_bytes_in_use"] / 2**20, "device"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "host RSS"


def build_case(case):
    """The case's `BertPretrainer` (built, under its dtype policy) and a batch of features.
    `case["dropout"]`, when set, replaces both dropout probabilities (for ablations)."""
    import keras

    import modeling
    if case["dtype_policy"] != "float32":
        keras.config.set_dtype_policy(case["dtype_policy"])
    dropout = case.get("dropout")
    overrides = {} if dropout is None else {"hidden_dropout_prob": dropout,
                                            "attention_probs_dropout_prob": dropout}
    vocab = case.get("vocab_size", VOCAB_SIZE)
    config = modeling.BertConfig(vocab_size=vocab, max_position_embeddings=512, type_vocab_size=2,
                                 **CONFIGS[case["config"]], **VARIANTS[case["variant"]], **overrides)
    model = modeling.BertPretrainer(config)
    model.build()
    return model, _features(case["batch_size"], case["seq_length"], case["predictions"], vocab)


def run_case(case):
    """Runs one case in this process and returns its measurements."""
    import keras
    model, features = build_case(case)
    backend = keras.backend.backend()
    step = _tf_step(model, case["xla"]) if backend == "tensorflow" else _jax_step(model)
    start = time.perf_counter()
    step(features)
    compile_s = time.perf_counter() - start
    for _ in range(case["warmup"]):
        step(features)
    times = []
    for _ in range(case["steps"]):
        start = time.perf_counter()
        loss = step(features)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    memory, memory_kind = _peak_memory_mb()
    flops = train_flops_per_step(CONFIGS[case["config"]], case["batch_size"], case["seq_length"],
                                 case["predictions"])
    return {**case, "backend": backend, "first_step_s": compile_s, "median_step_s": median,
            "model_tflops_per_s": flops / median / 1e12,
            "tokens_per_s": case["batch_size"] * case["seq_length"] / median,
            "sequences_per_s": case["batch_size"] / median, "peak_memory_mb": memory,
            "memory_kind": memory_kind, "final_loss": loss}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small", choices=sorted(CONFIGS))
    parser.add_argument("--seq_length", default="128", help="comma-separated")
    parser.add_argument("--batch_size", default="8", help="comma-separated")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--xla", default="off,on", help="comma-separated on/off (TF backend)")
    parser.add_argument("--dtype_policy", default="float32")
    parser.add_argument("--dropout", type=float, default=None,
                        help="replace both dropout probabilities (0.1 in the configs) for ablations")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--peak_matmul_size", type=int, default=0,
                        help="measure the matmul peak at this size first (8192 on a GPU) and report MFU")
    parser.add_argument("--pytorch_python", default=None,
                        help="a python with torch and transformers: add Hugging Face's BertModel as the peer")
    parser.add_argument("--max_batch", action="store_true",
                        help="search each variant's largest batch that fits, from --batch_size")
    parser.add_argument("--batch_multiple", type=int, default=8, help="the batch granularity of --max_batch")
    parser.add_argument("--batch_limit", type=int, default=4096, help="the largest batch --max_batch tries")
    parser.add_argument("--output", default=None, help="JSON path (default bench/results/...)")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:  # child process: one case
        case = json.loads(args.case)
        if case.get("kind") == "peak":
            emit_result({"peak_tflops": measure_matmul_peak_tflops(case["dtype"], case["size"])})
        else:
            emit_result_or_out_of_memory(lambda: run_case(case))
        return

    import keras
    backend = keras.backend.backend()
    xla_modes = [m == "on" for m in args.xla.split(",")] if backend == "tensorflow" else [True]
    seq_lengths = [int(s) for s in args.seq_length.split(",")]
    batch_sizes = [int(b) for b in args.batch_size.split(",")]
    cases = []
    for seq in seq_lengths:
        for batch in batch_sizes:
            for xla in xla_modes:
                for variant in args.variants.split(","):
                    cases.append({"config": args.config, "variant": variant, "seq_length": seq,
                                  "batch_size": batch, "xla": xla, "dropout": args.dropout,
                                  "predictions": predictions_per_seq(seq),
                                  "dtype_policy": args.dtype_policy, "steps": args.steps,
                                  "warmup": args.warmup})
    peak = None
    if args.peak_matmul_size:  # in its own process: a JAX child would not share the GPU
        policy = args.dtype_policy
        dtype = "bfloat16" if "bfloat16" in policy else "float16" if "float16" in policy else "float32"
        measured = run_case_process([sys.executable, os.path.abspath(__file__), "--case", json.dumps(
            {"kind": "peak", "dtype": dtype, "size": args.peak_matmul_size})])
        peak = measured and {"dtype": dtype, "size": args.peak_matmul_size, "tflops": measured["peak_tflops"]}
        if peak:
            print(f"measured matmul peak: {peak['tflops']:.1f} TFLOP/s ({dtype}, {args.peak_matmul_size}^3)")
    results = []
    print(f"{'seq':>4} {'batch':>5} {'xla':>3} {'variant':<16} {'step ms':>9} {'tokens/s':>10} {'seq/s':>8} "
          f"{'vs post-LN':>10} {'MFU':>6} {'peak MB':>9}")
    if args.max_batch:
        for template in (c for c in cases if c["batch_size"] == batch_sizes[0]):
            _search_largest_batch(lambda batch, t=template: _run_ours({**t, "batch_size": batch}, peak, results),
                                  template["batch_size"], args.batch_multiple, args.batch_limit,
                                  template["variant"])
        if args.pytorch_python:
            for seq in seq_lengths:
                _search_largest_batch(lambda batch, s=seq: _pytorch_case(args, s, batch, peak, results),
                                      batch_sizes[0], args.batch_multiple, args.batch_limit,
                                      "PyTorch sdpa")
    else:
        for case in cases:
            _run_ours(case, peak, results)
        if args.pytorch_python:
            for seq, batch in sorted({(c["seq_length"], c["batch_size"]) for c in cases}):
                _pytorch_case(args, seq, batch, peak, results)

    output = args.output or os.path.join(ROOT, "bench", "results", f"model_step-{backend}-{args.config}.json")
    write_report(output, "model_step", sys.argv[1:], results=results, matmul_peak=peak)


def _search_largest_batch(run, start, multiple, limit, name):
    """Finds the largest batch for which `run(batch)` (which returns the case's result) does not
    run out of memory, and marks that result `largest_fitting_batch`. A case that fails for
    another reason ends this search (said in a line); the other searches go on."""
    ran = {}

    class Failed(Exception):
        pass

    def fits(batch):
        ran[batch] = run(batch)
        if ran[batch].get("failed"):
            raise Failed
        return not ran[batch].get("out_of_memory")

    try:
        largest = largest_fitting_batch(fits, start, multiple, limit)
    except Failed:
        print(f"{name}: search stopped, a case failed for another reason than memory (its error is above)",
              flush=True)
        return
    if largest is None:
        print(f"{name}: not even batch {multiple} fits", flush=True)
        return
    result = ran[largest]
    result["largest_fitting_batch"] = True
    print(f"{name}, seq {result['seq_length']}: largest batch that fits {largest} "
          f"({result['sequences_per_s']:.1f} seq/s, {result['peak_memory_mb']:.0f} MB)", flush=True)


def _run_ours(case, peak, results):
    """Runs one case of our model in its own process, prints its row, appends its result
    (`failed` or `out_of_memory` set when it did not run) to `results` and returns it."""
    result = run_case_process([sys.executable, os.path.abspath(__file__), "--case", json.dumps(case)])
    if result is None or result.get("out_of_memory"):
        return _record_not_run(case, result, case["variant"], results)
    result["mfu"] = result["model_tflops_per_s"] / peak["tflops"] if peak else None
    base = next((r for r in results if r.get("variant") == "post-LN" and r.get("median_step_s")
                 and r["xla"] == case["xla"]
                 and r["seq_length"] == case["seq_length"]
                 and r["batch_size"] == case["batch_size"]), None)
    result["step_time_vs_post_ln"] = (result["median_step_s"] / base["median_step_s"]
                                      if base else 1.0 if case["variant"] == "post-LN" else None)
    ratio = result["step_time_vs_post_ln"]
    _print_row(case, "on" if case["xla"] else "off", case["variant"], result, f"{ratio:.3f}" if ratio else "-")
    results.append(result)
    return result


def _pytorch_case(args, seq, batch, peak, results):
    """The peer: transformers' BertModel with PyTorch's fused attention (sdpa) and the same
    heads on the masked positions, same shapes and batch (bench/peers/hf_pretraining_step.py).
    Prints its row, appends its result to `results` and returns it."""
    case = {"framework": "pytorch", "config": args.config, "shape": CONFIGS[args.config],
            "seq_length": seq, "batch_size": batch, "predictions": predictions_per_seq(seq),
            "dtype_policy": args.dtype_policy, "steps": args.steps, "warmup": args.warmup,
            "vocab_size": VOCAB_SIZE}
    result = run_case_process([args.pytorch_python, os.path.join(ROOT, "bench", "peers", "hf_pretraining_step.py"),
                               json.dumps(case)])
    if result is None or result.get("out_of_memory"):
        return _record_not_run(case, result, "PyTorch (sdpa)", results)
    flops = train_flops_per_step(case["shape"], batch, seq, case["predictions"])
    result = {**case, **result, "model_tflops_per_s": flops / result["median_step_s"] / 1e12}
    result["mfu"] = result["model_tflops_per_s"] / peak["tflops"] if peak else None
    _print_row(case, "", "PyTorch (sdpa)", result, "-")
    results.append(result)
    return result


def _record_not_run(case, result, name, results):
    """A case whose process failed (`result` None) or ran out of memory: prints why, appends
    the case marked `failed` or with the out-of-memory result to `results`, returns it."""
    print(f"{case['seq_length']:>4} {case['batch_size']:>5} {name}: "
          f"{'failed' if result is None else 'out of memory'}", flush=True)
    result = {**case, "failed": True} if result is None else {**case, **result}
    results.append(result)
    return result


def _print_row(case, xla, name, result, vs_post_ln):
    """One row of the table (the header is printed in `main`)."""
    mfu = f"{result['mfu']:.1%}" if result["mfu"] is not None else "-"
    print(f"{case['seq_length']:>4} {case['batch_size']:>5} {xla:>3} {name:<16} "
          f"{result['median_step_s'] * 1e3:>9.1f} {result['tokens_per_s']:>10.0f} "
          f"{result['sequences_per_s']:>8.1f} {vs_post_ln:>10} {mfu:>6} "
          f"{result['peak_memory_mb']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
