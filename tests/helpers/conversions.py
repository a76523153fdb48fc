"""convert_checkpoint.py run as its command line would (in this process: what a conversion
computes does not depend on a fresh interpreter; the tests that load its outputs in a fresh
process do so themselves), and its refuse-unless-forced contract."""

from helpers.in_process import completed_in_process


def convert(*flags):
    return completed_in_process("convert_checkpoint.py", *flags)


def refused_then_forced(flags, error_line):
    """Runs `flags`: it must stop with status 2 and `error_line` as its last line; then with
    --force it must succeed. Returns the forced run."""
    refused = convert(*flags)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines()[-1] == error_line
    forced = convert(*flags, "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    return forced
