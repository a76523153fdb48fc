"""What the benchmarks share: running one case in its own process, and the JSON report."""

import datetime
import json
import os
import platform
import subprocess
import sys

RESULT_PREFIX = "RESULT "


def emit_result(result):
    """In a case's process: print the result for `run_case_process` to read."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_case_process(cmd, env=None):
    """Runs `cmd` (a process that calls `emit_result`); returns its result dict, or None
    after printing the end of its stderr when it failed."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode or not lines:
        print(f"{' '.join(cmd[:3])} ... failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def write_report(path, benchmark, argv, **fields):
    """Writes the JSON report (date, machine, exact command, fields) atomically."""
    report = {"benchmark": benchmark, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpu_count": os.cpu_count()},
              "command": " ".join([f"bench/{benchmark}.py"] + list(argv)), **fields}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")
