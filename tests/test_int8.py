"""int8 prediction (`training.int8`): the quantized product against its hand-derived error bound
and a NumPy simulation of the same quantization, the model's dense layers in int8 only where
asked, and the refusal where oneDNN's kernels are off."""

import json
import os
import subprocess
import sys

import pytest

from bert_realformer.errors import InputError
from bert_realformer.training.int8 import check_int8_kernels

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "int8_arithmetic.py")


def test_the_int8_product_is_the_quantization_it_claims_and_runs_only_where_asked():
    measured = subprocess.run([sys.executable, HELPER], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"})
    assert measured.returncode == 0, measured.stderr[-3000:]
    product, model = (json.loads(measured.stdout.strip().splitlines()[-1])[k] for k in ("product", "model"))
    # Against float64: not float (an error), within the bound of the quantization steps.
    assert product["error"] > 1e-3 and product["within_bound"]
    # Against the same per-tensor quantization simulated in NumPy: equal up to float32 rounding,
    # far below one input step times a column's weights (what a different rounding would cost).
    assert product["from_simulation"] < 1e-4 < product["step_times_column_norm"]
    assert model["dense_layers"] == 2 * 6  # query, key, value, attention output, intermediate, output
    assert 0 < model["int8_vs_float"] < 0.01
    assert model["float_unchanged"] == 0.0 and model["eager_vs_traced"] < 1e-5  # float outside `active()`
    assert model["moved_int8_vs_float"] < model["moved_by"] / 10  # the refreshed kernels follow the weights
    assert model["traces"] == 1


@pytest.mark.skipif(os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0", reason="needs oneDNN's kernels off")
def test_without_onednn_int8_is_refused():
    with pytest.raises(InputError, match="quantize=int8 needs TensorFlow's oneDNN int8 kernels") as raised:
        check_int8_kernels()
    assert raised.value.options == ("quantize",)
