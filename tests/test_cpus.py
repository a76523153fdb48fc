"""The CPU count that sizes worker pools (affinity and cgroup quota, not the host's cores), and
the CPU's instruction-set flags."""

import os
import subprocess
import sys

import pytest

from bert_realformer.cpus import cpu_flags, usable_cpu_count


@pytest.fixture
def four_cpus_allowed(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5, 7}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)


@pytest.mark.parametrize("cpu_max,expected", [
    (None, 4),                  # no cgroup file: the affinity mask
    ("max 100000\n", 4),        # no quota
    ("150000 100000\n", 2),     # 1.5 CPUs of quota: 2 workers
    ("50000 100000\n", 1),
    ("800000 100000\n", 4),     # a quota above the mask: the mask
    ("garbage\n", 4),
])
def test_usable_cpus_follow_affinity_and_quota(tmp_path, four_cpus_allowed, cpu_max, expected):
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    assert usable_cpu_count(str(path)) == expected


def test_the_tokenizer_pool_default_is_the_usable_count():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # One CPU allowed: the default follows the mask, not the host.
    result = subprocess.run(["taskset", "-c", "0", sys.executable, os.path.join(root, "create_pretraining_data.py"),
                             "--helpfull"], capture_output=True, text=True, timeout=120)
    help_text = result.stdout + result.stderr
    block = help_text[help_text.index("  --num_workers:"):]
    assert "(default: '1')" in block[:block.index("(an integer)")]


def test_cpu_flags_are_read_from_the_first_cpu_of_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx avx2 fma\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(path)) == {"fpu", "avx", "avx2", "fma"}
    assert cpu_flags(str(tmp_path / "absent")) == frozenset()
