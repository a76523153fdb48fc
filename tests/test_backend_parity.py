"""The fixture tests pass unchanged on the JAX backend (modeling/ is backend-agnostic)."""

import os
import sys

import pytest
from helpers import script_processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_fixtures_reproduced_on_jax_backend():
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
    result = script_processes.run([sys.executable, os.path.join(ROOT, "tests", "test_model_fixtures.py")],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "fixtures reproduced on the jax backend" in result.stdout


def test_modeling_imports_no_tensorflow_at_module_level():
    """Only checkpoint I/O may import TensorFlow, inside its functions."""
    code = ("import sys, modeling; "
            "print('tensorflow' in sys.modules)")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
    result = script_processes.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_crf_against_enumeration_on_jax_backend():
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = script_processes.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             os.path.join(ROOT, "tests", "test_crf.py")],
                            env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "4 passed" in result.stdout
