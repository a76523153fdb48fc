"""How long a whole command takes on this machine (the suite, the demo, CI), recorded per CPU.

    python bench/wall_time.py --name=suite -- make test
    python bench/wall_time.py --name=demo -- make demo

Runs the command in this directory with its output passed through, and adds one run (seconds
from start to exit, its exit status and, for a pytest run, the tests that passed) to
`bench/results/wall_time-NAME-cpu-fFAMILY-mMODEL.json`, which keeps every run on that CPU.
Nothing else should run on the machine meanwhile.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# (Not bench/common.py: it sets TensorFlow's kernel choice in the environment the command would inherit.)
from bert_realformer.cpus import cpu_description, cpu_summary, cpu_tag  # noqa: E402


def _passed(output: str):
    """pytest's summary line: `693 passed, 1 warning in 571.20s` -> 693 (None: not a pytest run)."""
    found = re.findall(r"(\d+) passed", output)
    return int(found[-1]) if found else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="what is timed: suite, demo, ci, ...")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to time after --")
    cpu = cpu_description()
    path = os.path.join(ROOT, "bench", "results", f"wall_time-{args.name}-{cpu_tag()}.json")
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    for line in process.stdout:
        sys.stdout.write(line)
        output.append(line)
    status = process.wait()
    seconds = time.monotonic() - started
    runs = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            runs = json.load(f)["runs"]
    runs.append({"date": datetime.datetime.now().isoformat(timespec="seconds"), "seconds": round(seconds, 1),
                 "exit_status": status, "tests_passed": _passed("".join(output[-50:]))})
    report = {"benchmark": "wall_time", "date": runs[-1]["date"],
              "machine": {"platform": platform.platform(), "cpu": cpu, "cpu_count": os.cpu_count()},
              "command": " ".join(["bench/wall_time.py", *sys.argv[1:]]), "name": args.name,
              "timed": " ".join(command), "runs": runs}
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"wrote {path} (CPU: {cpu_summary(cpu)})")
    print(f"{' '.join(command)}: {seconds:.0f} s, exit status {status}")
    sys.exit(status)


if __name__ == "__main__":
    main()
