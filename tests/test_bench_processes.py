"""`bench/predict_throughput.py --processes=N`: one case's processes reduced to one row."""

from bench.predict_throughput import _median_of


def _process(ms, steady=None):
    result = {"examples_per_s": 1000 / ms, "ms_per_batch": ms, "seconds": [ms / 100], "tensorflow": "2.21.0"}
    return result if steady is None else {**result, "ms_per_batch_steady": steady}


def test_each_time_is_the_median_of_the_processes_and_each_process_is_kept():
    processes = [_process(8.0, 7.0), _process(12.0, 6.0), _process(9.0, 9.5)]
    row = _median_of(processes)
    assert (row["ms_per_batch"], row["ms_per_batch_steady"], row["examples_per_s"]) == (9.0, 7.0, 1000 / 9.0)
    assert row["seconds"] == [0.08] and row["tensorflow"] == "2.21.0"  # (the first process's)
    assert [p["ms_per_batch_steady"] for p in row["processes"]] == [7.0, 6.0, 9.5]
    assert [p["seconds"] for p in row["processes"]] == [[0.08], [0.12], [0.09]]


def test_one_process_is_its_own_row_and_a_failed_process_fails_the_case():
    assert _median_of([_process(8.0)]) == _process(8.0)
    assert "ms_per_batch_steady" not in _median_of([_process(8.0), _process(9.0)])  # (a peer's: none)
    assert _median_of([_process(8.0), None, _process(9.0)]) is None
    assert _median_of([]) is None
