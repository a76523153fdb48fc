"""run_pretraining.py's real code path against the bare train step, same config and batch.

For each config, side by side in one run (each case in its own process):
* bare step: `bench/model_step.py`'s step (forward, backward, SGD update; synthetic features
  held in memory; no input pipeline, no loop, no optimizer slots);
* bare step + AdamW: the same with the original's optimizer and clipping (`TrainLoop`, one
  step per call, features from memory), to separate the optimizer's cost from the driver's;
* driver: `run_pretraining.py --do_train` itself on People's Daily TFRecords (input
  pipeline, `iterations_per_loop` steps per call, AdamW, summaries, checkpoints), its
  examples/s read from its progress lines (the first loop, which traces, left out).

    python bench/driver_overhead.py [--configs=demo,small] [--batch_size=32] [--steps=150]

Prints a table; writes bench/results/driver_overhead.json.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import emit_result, peoples_daily_records, run_case_process, write_report  # noqa: E402
from model_step import CONFIGS  # noqa: E402

VOCAB_SIZE = 21128  # the Chinese vocabulary of the records
SHAPES = {"demo": (64, 10), "small": (128, 20)}  # config -> (seq_length, max_predictions_per_seq)


def bare_adamw_case(case):
    """Median seconds of one TrainLoop step (AdamW, clipping) on in-memory features."""
    import keras
    import tensorflow as tf
    from model_step import build_case

    from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss
    from bert_realformer.training.optimization import create_optimizer
    from bert_realformer.training.trainer import TrainLoop
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model, features = build_case(case)
        optimizer = create_optimizer(1e-4, 100000, 1000)
        loop = TrainLoop(strategy, model, optimizer,
                         lambda m, f, step, totals: replica_pretraining_loss(
                             m(f, training=True), f, totals),
                         pretraining_totals)
    iterator = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors(features).repeat()))
    for _ in range(3):
        float(loop.train_step(iterator)["loss"])
    times = []
    for _ in range(case["steps"]):
        start = time.perf_counter()
        float(loop.train_step(iterator)["loss"])
        times.append(time.perf_counter() - start)
    return {"median_step_s": statistics.median(times)}


def driver_case(config, records, seq, predictions, batch, steps, loop_steps, work):
    """examples/s of run_pretraining.py's progress lines after its first loop."""
    config_path = os.path.join(work, f"{config}.json")
    with open(config_path, "w") as f:
        json.dump({**CONFIGS[config], "vocab_size": VOCAB_SIZE, "max_position_embeddings": 512,
                   "type_vocab_size": 2}, f)
    out = tempfile.mkdtemp(dir=work)
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config_path}",
         f"--input_file={records}", f"--output_dir={out}", "--do_train", f"--train_batch_size={batch}",
         f"--max_seq_length={seq}", f"--max_predictions_per_seq={predictions}",
         f"--num_train_steps={steps}", f"--num_warmup_steps={steps // 10}", "--learning_rate=1e-4",
         f"--iterations_per_loop={loop_steps}", f"--save_checkpoints_steps={steps}"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode:
        raise SystemExit(f"run_pretraining.py failed:\n{result.stderr[-3000:]}")
    rates = [float(m.group(1)) for m in re.finditer(r", ([\d.]+) examples/s", result.stderr)]
    return {"examples_per_s": statistics.median(rates[1:])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="demo,small")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", default="150,40", help="driver steps per config (bare steps: a third)")
    parser.add_argument("--iterations_per_loop", default="25,8", help="per config")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are kept")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "driver_overhead.json"))
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        emit_result(bare_adamw_case(json.loads(args.case)))
        return

    work = tempfile.mkdtemp(prefix="bench-driver-")
    results = []
    print(f"batch {args.batch_size}; examples/s, median of {args.rounds} interleaved rounds")
    print(f"{'config':<7} {'bare step':>10} {'bare+AdamW':>11} {'driver':>9} {'driver/bare':>12} "
          f"{'driver/bare+AdamW':>18}")
    configs = args.configs.split(",")
    steps = dict(zip(configs, (int(n) for n in args.steps.split(","))))
    loops = dict(zip(configs, (int(n) for n in args.iterations_per_loop.split(","))))
    for config in configs:
        seq, predictions = SHAPES[config]
        records = peoples_daily_records(work, seq, predictions)
        case = {"config": config, "variant": "post-LN", "seq_length": seq, "batch_size": args.batch_size,
                "predictions": predictions, "xla": False, "dtype_policy": "float32",
                "steps": max(8, steps[config] // 3), "warmup": 3, "vocab_size": VOCAB_SIZE}
        rates = {"bare": [], "bare_adamw": [], "driver": []}
        for _ in range(args.rounds):
            bare = run_case_process([sys.executable, os.path.join(ROOT, "bench", "model_step.py"),
                                     "--case", json.dumps(case)])
            adamw = run_case_process([sys.executable, os.path.abspath(__file__), "--case", json.dumps(case)])
            if bare is None or adamw is None:
                raise SystemExit(f"{config}: a bare case failed")
            rates["bare"].append(args.batch_size / bare["median_step_s"])
            rates["bare_adamw"].append(args.batch_size / adamw["median_step_s"])
            rates["driver"].append(driver_case(config, records, seq, predictions, args.batch_size,
                                               steps[config], loops[config], work)["examples_per_s"])
        row = {"config": config, "shape": CONFIGS[config], "seq_length": seq, "predictions": predictions,
               "batch_size": args.batch_size, "rounds": rates,
               **{f"{name}_examples_per_s": statistics.median(values) for name, values in rates.items()}}
        row["driver_vs_bare"] = row["driver_examples_per_s"] / row["bare_examples_per_s"]
        row["driver_vs_bare_adamw"] = row["driver_examples_per_s"] / row["bare_adamw_examples_per_s"]
        results.append(row)
        print(f"{config:<7} {row['bare_examples_per_s']:>10.1f} {row['bare_adamw_examples_per_s']:>11.1f} "
              f"{row['driver_examples_per_s']:>9.1f} {row['driver_vs_bare']:>12.3f} "
              f"{row['driver_vs_bare_adamw']:>18.3f}", flush=True)
    write_report(args.output, "driver_overhead", sys.argv[1:], results=results)


if __name__ == "__main__":
    main()
