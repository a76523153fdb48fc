"""Every numeric flag of every script has its range (`bert_realformer/commandline/flag_ranges.py`), checked as
the command line is parsed: each value just outside it, given to the script, ends in one
`error: flag --NAME=VALUE: ...` line and exit 2 before any work, and so does nan or inf for a
float flag. Each script runs in a process
of its own (their flags share names)."""

import json
import sys

import pytest
from helpers import script_processes

from bert_realformer.commandline.flag_ranges import Range

SCRIPTS = ["run_classifier", "run_squad", "run_ner", "run_multiple_choice", "run_pretraining",
           "create_pretraining_data", "extract_features", "convert_checkpoint", "extend_vocabulary",
           "analyze_attention", "run_study", "prepare_study_data"]

# In the script's process: each numeric flag, each value outside its range, through the script's
# own entry (absl's parsing and the runner's error line), stderr and exit status captured.
WALK = r"""
import contextlib, io, json, sys
from absl import flags
from bert_realformer.commandline import flag_ranges
module = __import__(f"bert_realformer.cli.{sys.argv[1]}", fromlist=["entry"])
results = {}
for name in flag_ranges.numeric_flags():
    allowed = flag_ranges.RANGES[name]
    if allowed is None:
        results[name] = "any"
        continue
    integer = type(flags.FLAGS[name].parser).__name__ == "IntegerParser"
    for value in [*allowed.outside(integer), *([] if integer else ["nan", "inf"])]:
        stderr = io.StringIO()
        sys.argv = [sys.argv[0], f"--{name}={value}"]
        flags.FLAGS.unparse_flags()
        with contextlib.redirect_stderr(stderr):
            try:
                module.entry()
                status = 0
            except SystemExit as stop:
                status = stop.code
        results[f"{name}={value}"] = [status, stderr.getvalue()]
print(json.dumps(results))
"""


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_numeric_flag_out_of_range_is_one_line_and_exit_2(script):
    proc = script_processes.run([sys.executable, "-c", WALK, script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert bool(results) == (script != "extend_vocabulary"), results  # (it has no numeric flag)
    for case, outcome in results.items():
        if outcome == "any":
            continue
        status, stderr = outcome
        lines = stderr.strip().splitlines()
        assert status == 2 and len(lines) == 1, (case, status, stderr)
        assert lines[0].startswith(f"error: flag --{case}: "), (case, lines[0])


def test_ranges_by_hand():
    rate = Range(0, low_open=True)
    assert rate.accepts(1e-5) and not rate.accepts(0.0) and not rate.accepts(-1e-2) and rate.accepts(None)
    assert rate.describe() == "must be greater than 0" and rate.outside(False) == [0.0]
    share = Range(0, 1)
    assert share.accepts(0) and share.accepts(1) and not share.accepts(2)
    assert share.describe() == "must be in [0, 1]" and share.outside(False) == [-1.0, 1.5]
    assert Range(1).describe() == "must be at least 1" and Range(1).outside(True) == [0]
    decay = Range(0, 1, high_open=True)
    assert decay.accepts(0.0) and decay.accepts(0.999) and not decay.accepts(1.0) and not decay.accepts(-0.1)
    assert decay.describe() == "must be in [0, 1)" and decay.outside(False) == [-1.0, 1.0]


def test_a_script_entered_after_tensorflow_ranges_its_own_flags_alone():
    # TensorFlow defines numeric flags of its own as it is imported (the tensor tracer's); a script
    # whose entry runs after that (a notebook, a process that imported TensorFlow first) still
    # ranges its own flags and leaves TensorFlow's alone rather than missing them in the table.
    from absl import flags

    from bert_realformer.commandline import flag_ranges
    flag_values = flags.FlagValues()
    flags.DEFINE_float("delta_threshold", 0.5, "TensorFlow's.", flag_values=flag_values,
                       module_name="tensorflow.python.tpu.tensor_tracer_flags")
    flags.DEFINE_integer("max_seq_length", 128, "The script's.", flag_values=flag_values,
                         module_name="bert_realformer.cli.run_classifier")
    assert flag_ranges.numeric_flags(flag_values) == ["max_seq_length"]
    flag_ranges.register(flag_values)
    with pytest.raises(flags.IllegalFlagValueError, match="max_seq_length"):
        flag_values(["script", "--max_seq_length=0", "--delta_threshold=-3"])
