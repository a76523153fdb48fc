"""The CPU count that sizes worker pools (affinity and cgroup quota, not the host's cores), the
CPU's instruction-set flags, and the CPU a benchmark's report names."""

import json
import os
import subprocess
import sys

import pytest

from bench.common import write_report
from bert_realformer.cpus import cpu_description, cpu_flags, cpu_summary, usable_cpu_count


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


ZEN_3 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
         "model name\t: AMD EPYC 7B13\nflags\t\t: fpu sse4_2 avx fma avx2 bmi2 sha_ni\n\n"
         "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
         "model name\t: AMD EPYC 7B13\nflags\t\t: fpu sse4_2 avx fma avx2 bmi2 sha_ni\n")
SAPPHIRE_RAPIDS = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
                   "model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n"
                   "flags\t\t: avx2 fma avx512f avx512_vnni avx512_bf16 avx_vnni amx_bf16 amx_tile amx_int8\n")


def test_the_cpu_is_described_by_its_model_and_the_instruction_sets_kernels_choose_by(tmp_path):
    zen_3, xeon = tmp_path / "zen3", tmp_path / "xeon"
    zen_3.write_text(ZEN_3)
    xeon.write_text(SAPPHIRE_RAPIDS)
    assert cpu_description(str(zen_3)) == {"model_name": "AMD EPYC 7B13", "vendor": "AuthenticAMD", "family": 25,
                                           "model": 1, "instruction_sets": ["avx2", "fma"]}
    assert cpu_summary(cpu_description(str(zen_3))) == "AMD EPYC 7B13, family 25 model 1 (avx2 fma)"
    xeon_cpu = cpu_description(str(xeon))
    assert xeon_cpu["instruction_sets"] == [
        "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]
    assert (xeon_cpu["family"], xeon_cpu["model"]) == (6, 143)
    assert cpu_description(str(tmp_path / "absent")) == {}
    assert cpu_summary({}) == "CPU not described by this system"


def test_a_benchmark_report_names_the_cpu_it_ran_on(tmp_path, capsys):
    path = str(tmp_path / "report.json")
    write_report(path, "predict_throughput", ["--config=small"], rows=[])
    with open(path) as f:
        machine = json.load(f)["machine"]
    assert machine["cpu"] == cpu_description()
    assert machine["cpu"]  # (Linux lists its CPUs)
    assert f"(CPU: {cpu_summary(machine['cpu'])})" in capsys.readouterr().out
