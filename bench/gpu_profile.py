"""Where a train step's GPU time goes: per-kernel totals from a JAX profiler trace.

Runs the pretraining step of `bench/model_step.py` (Keras JAX backend) for a few warm-up steps,
traces `--steps` more with `jax.profiler` (which also writes a Perfetto JSON trace), and sums
the device kernels' time by name and by kind (matmul, fused elementwise/reduction, copies).
Optionally writes the compiled step's HLO, to map fusion names back to the model's operations.

    KERAS_BACKEND=jax python bench/gpu_profile.py --config=large --seq_length=128 \
        --batch_size=64 --variant=post-LN --dtype_policy=mixed_bfloat16 --output=profile.json

Prints the top kernels and writes the JSON summary to `--output`.
"""

import argparse
import collections
import glob
import gzip
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import model_step  # noqa: E402

MATMUL_MARKERS = ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul", "hgmma", "wgmma")


def kernel_kind(name):
    """A coarse kind for a kernel name: matmul, copy, or fusion (everything XLA generated)."""
    lowered = name.lower()
    if any(marker in lowered for marker in MATMUL_MARKERS):
        return "matmul"
    if "memcpy" in lowered or "memset" in lowered or "copy" in lowered:
        return "copy"
    if "cudnn" in lowered or "flash" in lowered or "fmha" in lowered:
        return "fused attention"
    return "fusion"


def device_kernel_totals(trace_events):
    """{kernel name: [total microseconds, count]} over the events of the GPU processes."""
    gpu_pids = set()
    for event in trace_events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            label = str(event.get("args", {}).get("name", ""))
            if "gpu" in label.lower() and "host" not in label.lower():
                gpu_pids.add(event.get("pid"))
    if not gpu_pids:
        names = {str(e.get("args", {}).get("name")) for e in trace_events if e.get("ph") == "M"}
        print(f"no GPU process in the trace; processes: {sorted(names)[:20]}")
    totals = collections.defaultdict(lambda: [0.0, 0])
    for event in trace_events:
        if event.get("ph") == "X" and event.get("pid") in gpu_pids:
            entry = totals[event.get("name", "?")]
            entry[0] += float(event.get("dur", 0.0))
            entry[1] += 1
    return totals


def _read_trace(log_dir):
    paths = glob.glob(os.path.join(log_dir, "**", "*.json.gz"), recursive=True)
    if not paths:
        raise SystemExit(f"no JSON trace under {log_dir}: {os.listdir(log_dir)}")
    with gzip.open(paths[0], "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="large", choices=sorted(model_step.CONFIGS))
    parser.add_argument("--variant", default="post-LN", choices=sorted(model_step.VARIANTS))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--dtype_policy", default="mixed_bfloat16")
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--hlo", default=None, help="write the compiled step's HLO text here")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    import jax
    case = {"config": args.config, "variant": args.variant, "seq_length": args.seq_length,
            "batch_size": args.batch_size, "dtype_policy": args.dtype_policy,
            "predictions": model_step.predictions_per_seq(args.seq_length),
            "dropout": args.dropout}
    model, features = model_step.build_case(case)
    step, state = model_step.jax_train_step(model)
    if args.hlo:
        compiled = step.lower(state["t"], state["n"], features).compile()
        with open(args.hlo, "w") as f:
            f.write(compiled.as_text())
    for _ in range(3):
        loss, state["t"], state["n"] = step(state["t"], state["n"], features)
    float(loss)
    log_dir = tempfile.mkdtemp()
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        for _ in range(args.steps):
            loss, state["t"], state["n"] = step(state["t"], state["n"], features)
        float(loss)
    totals = device_kernel_totals(_read_trace(log_dir))
    total_us = sum(t for t, _ in totals.values())
    by_kind = collections.Counter()
    for name, (t, _) in totals.items():
        by_kind[kernel_kind(name)] += t
    print(f"{args.config} {args.variant} seq {args.seq_length} batch {args.batch_size}: "
          f"{total_us / args.steps / 1e3:.1f} ms of kernels per step, {len(totals)} kernels")
    for kind, t in by_kind.most_common():
        print(f"  {kind:<16} {t / args.steps / 1e3:8.2f} ms  {t / total_us:6.1%}")
    top = sorted(totals.items(), key=lambda item: -item[1][0])[:args.top]
    for name, (t, count) in top:
        print(f"  {t / args.steps / 1e3:7.2f} ms {count // args.steps:4d}x  {name[:110]}")
    with open(args.output, "w") as f:
        json.dump({"case": case, "kernel_ms_per_step": total_us / args.steps / 1e3,
                   "by_kind_ms": {k: v / args.steps / 1e3 for k, v in by_kind.items()},
                   "kernels": {name: {"ms_per_step": t / args.steps / 1e3, "count": c // args.steps}
                               for name, (t, c) in totals.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
