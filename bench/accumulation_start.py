"""run_pretraining.py with gradient accumulation: how long until the first step, how long a step
takes after it, and the process's peak memory, for each number of micro-batches a step.

The step traces its forward and backward pass once, in a graph loop over the micro-batches; a
graph unrolled over them would trace (and hold) one copy per micro-batch. Each case is one
`run_pretraining.py --do_train` process on People's Daily records (the 21128-token Chinese
vocabulary), `--iterations_per_loop=1`, so every step prints its progress line:

    python bench/accumulation_start.py [--config=base] [--seq_length=64] [--batch_size=2]
        [--accumulation=1,8,32] [--steps=3] [--tag=...]

Prints a table; writes bench/results/accumulation_start-<config>[-<tag>].json.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import peoples_daily_records, write_report  # noqa: E402
from model_step import CONFIGS  # noqa: E402

VOCAB_SIZE = 21128
PROGRESS = re.compile(r"step \d+/\d+: loss ")


def run_case(config_path, records, args, accumulation, work):
    """{seconds_to_first_step, step_s (after the first), peak_rss_mb} of one run_pretraining.py."""
    out = tempfile.mkdtemp(dir=work)
    command = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config_path}",
               f"--input_file={records}", f"--output_dir={out}", "--do_train",
               f"--train_batch_size={args.batch_size}", f"--gradient_accumulation_steps={accumulation}",
               f"--max_seq_length={args.seq_length}", f"--max_predictions_per_seq={args.max_predictions}",
               f"--num_train_steps={args.steps}", "--num_warmup_steps=1", "--learning_rate=1e-4",
               "--iterations_per_loop=1", f"--save_checkpoints_steps={args.steps}"]
    started = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    progress, tail = [], []  # the seconds at which each step's progress line came
    for line in process.stderr:
        tail = (tail + [line])[-30:]
        if PROGRESS.search(line):
            progress.append(time.monotonic() - started)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode or len(progress) < 2:
        raise SystemExit(f"run_pretraining.py failed (accumulation {accumulation}):\n{''.join(tail)}")
    return {"accumulation": accumulation, "seconds_to_first_step": round(progress[0], 1),
            "step_s": round((progress[-1] - progress[0]) / (len(progress) - 1), 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="base", choices=sorted(CONFIGS))
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--max_predictions", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=2, help="examples a micro-batch")
    parser.add_argument("--accumulation", default="1,8,32", help="micro-batches a step, one case each")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-accumulation-")
    config_path = os.path.join(work, "bert_config.json")
    with open(config_path, "w") as f:
        json.dump({**CONFIGS[args.config], "vocab_size": VOCAB_SIZE, "max_position_embeddings": 512,
                   "type_vocab_size": 2}, f)
    records = peoples_daily_records(work, args.seq_length, args.max_predictions)
    print(f"{args.config}, micro-batches of {args.batch_size} x {args.seq_length} tokens")
    print(f"{'micro-batches a step':>20} {'s to the first step':>20} {'s a step after it':>18} {'peak MB':>8}")
    results = []
    for accumulation in (int(n) for n in args.accumulation.split(",")):
        result = run_case(config_path, records, args, accumulation, work)
        results.append(result)
        print(f"{accumulation:>20} {result['seconds_to_first_step']:>20.1f} {result['step_s']:>18.3f} "
              f"{result['peak_rss_mb']:>8}", flush=True)
    name = f"accumulation_start-{args.config}" + (f"-{args.tag}" if args.tag else "")
    write_report(os.path.join(ROOT, "bench", "results", f"{name}.json"), "accumulation_start", sys.argv[1:],
                 config=args.config, seq_length=args.seq_length, batch_size=args.batch_size, steps=args.steps,
                 results=results)


if __name__ == "__main__":
    main()
