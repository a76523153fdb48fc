"""docs/keras.md's snippets, run in order as one program in a fresh process, on the tiny
checkpoint standing where the guide's released one is: a guide whose code stopped working fails."""

import os
import re
import sys

import pytest
from helpers import script_processes

pytestmark = pytest.mark.slow  # a fresh process trains, saves, exports and quantizes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "keras.md")


def _snippets():
    with open(GUIDE, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.DOTALL)


def test_the_guide_has_a_snippet_per_section():
    with open(GUIDE, encoding="utf-8") as f:
        sections = [line for line in f if line.startswith("## ")]
    assert len(_snippets()) == len(sections) >= 7


def test_the_keras_guide_runs_as_written(tmp_path):
    os.symlink(os.path.join(ROOT, "tests", "data", "bert_postln_tiny"), tmp_path / "uncased_L-12_H-768_A-12")
    program = tmp_path / "guide.py"
    program.write_text("\n".join(_snippets()) + '\nprint("the guide ran")\n')
    environment = {**os.environ, "PYTHONPATH": ROOT}
    result = script_processes.run([sys.executable, str(program)], cwd=tmp_path, env=environment,
                                  capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("the guide ran")
    assert (tmp_path / "exported" / "saved_model.pb").exists()
    assert (tmp_path / "exported_int8" / "saved_model.pb").exists()
    assert (tmp_path / "lora" / "model.ckpt-1.index").exists()
