"""`bench/model_step.py --max_batch`: the search against a fake memory limit, and how a case's
process tells running out of memory from other failures."""

import importlib.util
import json

import pytest

from bench.batch_search import largest_fitting_batch
from bench.common import RESULT_PREFIX, emit_result_or_out_of_memory


def _fits_below(threshold, calls):
    def fits(batch):
        calls.append(batch)
        return batch <= threshold
    return fits


@pytest.mark.parametrize("start", [1, 8, 32, 64, 100, 512, 5000])
@pytest.mark.parametrize("multiple", [1, 8, 16])
def test_finds_the_largest_multiple_that_fits_probing_each_batch_once(start, multiple):
    limit = 1024
    for threshold in list(range(0, 70)) + [77, 95, 96, 97, 255, 256, 1000, 1023, 1024, 3000]:
        calls = []
        found = largest_fitting_batch(_fits_below(threshold, calls), start, multiple, limit)
        expected = min(threshold, limit) // multiple * multiple
        assert found == (expected if expected >= multiple else None), (threshold, start)
        assert len(calls) == len(set(calls)), calls
        assert all(b % multiple == 0 and multiple <= b <= limit for b in calls), calls
        # doubling/halving from the start, then bisection: logarithmic in the bracket
        assert len(calls) <= 2 * (limit // multiple).bit_length() + 1, (threshold, calls)


def test_a_start_next_to_the_answer_takes_few_probes():
    calls = []
    # BERT-Large at seq 512 on 80 GB: batch 64 fits, about 78 is the limit
    assert largest_fitting_batch(_fits_below(78, calls), start=64, multiple=8) == 72
    assert calls == [64, 128, 96, 80, 72]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="multiple"):
        largest_fitting_batch(lambda b: True, start=8, multiple=0)
    with pytest.raises(ValueError, match="limit"):
        largest_fitting_batch(lambda b: True, start=8, multiple=16, limit=8)


def _emitted(capsys):
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(RESULT_PREFIX)
    return json.loads(line[len(RESULT_PREFIX):])


def test_the_frameworks_out_of_memory_errors_become_a_result(capsys):
    import jax
    import tensorflow as tf

    errors = [  # what each raises when the device memory runs out
        jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12.50GiB."),
        tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[64,16,512,512]"),
    ]
    if importlib.util.find_spec("torch"):  # the `oracles` extra (Python 3.11 only)
        import torch
        errors.append(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB."))
    for error in errors:
        def measure(error=error):
            raise error
        emit_result_or_out_of_memory(measure)
        result = _emitted(capsys)
        assert result["out_of_memory"] is True
        assert result["error"] == str(error).strip().splitlines()[0]


def test_other_errors_fail_the_case_and_results_pass_through(capsys):
    def broken():
        raise ValueError("shapes (64, 128) and (512,) are incompatible")
    with pytest.raises(ValueError, match="incompatible"):
        emit_result_or_out_of_memory(broken)
    emit_result_or_out_of_memory(lambda: {"median_step_s": 0.25})
    assert _emitted(capsys) == {"median_step_s": 0.25}
