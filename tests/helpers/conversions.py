"""convert_checkpoint.py in a subprocess, and its refuse-unless-forced contract."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def convert(*flags):
    return subprocess.run([sys.executable, os.path.join(ROOT, "convert_checkpoint.py"), *flags],
                          capture_output=True, text=True, timeout=600)


def refused_then_forced(flags, error_line):
    """Runs `flags`: it must stop with status 2 and `error_line` as its last line; then with
    --force it must succeed. Returns the forced run."""
    refused = convert(*flags)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines()[-1] == error_line
    forced = convert(*flags, "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    return forced
