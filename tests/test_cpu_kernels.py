"""oneDNN's kernels turned on where TensorFlow leaves them off (x86-64 Linux, AVX2 and FMA), and
never against the user's own `TF_ENABLE_ONEDNN_OPTS`."""

import os
import subprocess
import sys

import pytest

from bert_realformer.cpu_kernels import ONEDNN_SWITCH, slow_int8_warning, slow_precision_warning, turn_on_onednn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZEN3 = frozenset("fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma bmi2".split())  # AVX2 and FMA, no AVX-512
SANDY_BRIDGE = frozenset("fpu sse sse2 ssse3 sse4_1 sse4_2 avx".split())
NO_TENSORFLOW = {}


@pytest.mark.parametrize("environ,flags,machine,modules,turned_on", [
    ({}, ZEN3, "x86_64", NO_TENSORFLOW, True),
    ({}, ZEN3 | {"avx512f", "avx512_vnni"}, "x86_64", NO_TENSORFLOW, True),  # on already: the same
    ({ONEDNN_SWITCH: "0"}, ZEN3, "x86_64", NO_TENSORFLOW, False),            # the user's choice stays
    ({ONEDNN_SWITCH: "1"}, ZEN3, "x86_64", NO_TENSORFLOW, False),
    ({}, SANDY_BRIDGE, "x86_64", NO_TENSORFLOW, False),                       # no AVX2: TensorFlow's choice
    ({}, ZEN3 - {"fma"}, "x86_64", NO_TENSORFLOW, False),
    ({}, ZEN3, "aarch64", NO_TENSORFLOW, False),
    ({}, ZEN3, "x86_64", {"tensorflow": object()}, False),                   # read already: too late
])
def test_onednn_is_turned_on_only_on_x86_cpus_with_avx2_and_fma_and_never_against_the_user(
        environ, flags, machine, modules, turned_on):
    before = dict(environ)
    assert turn_on_onednn(environ, flags, machine, modules) is turned_on
    assert environ == ({**before, ONEDNN_SWITCH: "1"} if turned_on else before)


def _kernels_in_a_script(extra_env):
    """(TF_ENABLE_ONEDNN_OPTS, TensorFlow's oneDNN switch) as a script sees them, run through the
    scripts' runner with the variable removed from this environment, then `extra_env` added."""
    code = ("import os\n"
            "from bert_realformer.commandline import runner\n"
            "def main(argv):\n"
            "    from tensorflow.python.util import _pywrap_util_port\n"
            f"    print(os.environ.get({ONEDNN_SWITCH!r}), _pywrap_util_port.IsMklEnabled())\n"
            "runner.run(main)\n")
    env = {k: v for k, v in os.environ.items() if k != ONEDNN_SWITCH}
    env.update(extra_env)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    switch, enabled = result.stdout.split()[-2:]
    return switch, enabled == "True"


def test_a_script_runs_onednn_kernels_unless_the_user_turned_them_off():
    # (On a CPU with AVX512_VNNI TensorFlow turns them on itself; on an AVX2-only one only the
    # runner does: both end the same. On a CPU without AVX2 the runner leaves TensorFlow's choice.)
    switch, enabled = _kernels_in_a_script({})
    if turn_on_onednn({}, modules={}):  # this CPU: x86-64 Linux with AVX2 and FMA
        assert (switch, enabled) == ("1", True)
    else:
        assert switch == "None"
    assert _kernels_in_a_script({ONEDNN_SWITCH: "0"}) == ("0", False)


ZEN4 = ZEN3 | {"avx512f", "avx512_vnni", "avx512_bf16"}
SAPPHIRE_RAPIDS = ZEN4 | {"avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}
SAID = {"bf16": ("--mixed_precision=bf16 on a CPU without bf16 instructions (AMD EPYC: no AVX512_BF16 or AMX_BF16): "
                 "bf16 runs slower than float32 there (BENCHMARKS.md, \"Mixed precision and int8\"); "
                 "--mixed_precision=none is faster on this CPU"),
        "fp16": ("--mixed_precision=fp16 on a CPU without fp16 instructions (AMD EPYC: no AVX512_FP16 or AMX_FP16): "
                 "fp16 runs slower than float32 there (BENCHMARKS.md, \"Mixed precision and int8\"); "
                 "--mixed_precision=none is faster on this CPU")}


@pytest.mark.parametrize("precision,devices,flags,warned", [
    ("bf16", {"CPU"}, ZEN3, True),                     # AVX2 only: bf16 and fp16 slower than float32
    ("fp16", {"CPU"}, ZEN3, True),
    ("bf16", {"CPU"}, SANDY_BRIDGE, True),
    ("bf16", {"CPU"}, ZEN4, False),                    # AVX512_BF16
    ("fp16", {"CPU"}, ZEN4, True),                     # (no fp16 products)
    ("bf16", {"CPU"}, SAPPHIRE_RAPIDS - {"avx512_bf16"}, False),  # AMX_BF16
    ("fp16", {"CPU"}, SAPPHIRE_RAPIDS, False),         # AVX512_FP16
    ("bf16", {"GPU"}, ZEN3, False),                    # the products run on the GPU
    ("fp16", {"TPU"}, ZEN3, False),
    ("none", {"CPU"}, ZEN3, False),
    ("bf16", {"CPU"}, frozenset(), False),             # instruction sets not listed (Arm, macOS): no guess
])
def test_half_precision_on_a_cpu_without_its_products_is_one_warning(precision, devices, flags, warned):
    said = slow_precision_warning(precision, devices == {"CPU"}, flags, cpu_name="AMD EPYC")
    assert said == (SAID[precision] if warned else None)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_half_precision_run_says_so_in_one_line_where_this_cpu_has_no_products_for_it(tmp_path, precision):
    from helpers.pretraining_runs import command, run
    result = run(command(tmp_path, "--do_train", "--num_train_steps=2", "--iterations_per_loop=2",
                         f"--mixed_precision={precision}"))
    assert result.returncode == 0, result.stderr[-3000:]
    expected = slow_precision_warning(precision, on_cpus=True)  # (this CPU's)
    said = [line for line in result.stderr.splitlines() if f"--mixed_precision={precision} on a CPU" in line]
    assert len(said) == (expected is not None) and all(line.endswith(expected) for line in said), said


def _amd(family, model):
    return {"vendor": "AuthenticAMD", "model_name": "AMD EPYC", "family": family, "model": model}


@pytest.mark.parametrize("quantize,on_cpus,cpu,warned", [
    ("int8", True, _amd(23, 1), True),                 # Zen 1 (measured)
    ("int8", True, _amd(23, 8), True),                 # Zen+: the same core
    ("int8", True, _amd(23, 47), True),
    ("int8", True, _amd(23, 48), False),               # Zen 2 from model 48 on (its int8 gains: 1.04-1.28x)
    ("int8", True, _amd(23, 49), False),
    ("int8", True, _amd(25, 1), False),                # Zen 3
    ("int8", True, {**_amd(23, 1), "vendor": "HygonGenuine", "family": 24}, False),
    ("int8", True, {**_amd(6, 1), "vendor": "GenuineIntel"}, False),
    ("int8", True, {**_amd(23, 1), "model": None}, False),  # a model Linux does not list: no guess
    ("int8", True, {}, False),                         # no /proc/cpuinfo (macOS)
    ("int8", False, _amd(23, 1), False),               # a GPU runs the model
    ("none", True, _amd(23, 1), False),
])
def test_int8_on_a_cpu_where_it_gains_nothing_is_one_warning(quantize, on_cpus, cpu, warned):
    said = slow_int8_warning(quantize, on_cpus, cpu)
    if not warned:
        assert said is None
        return
    assert said == (f"--quantize=int8 on an AMD Zen or Zen+ core (AMD EPYC, family 23 model {cpu['model']}): "
                    "int8 runs no faster than float32 there (BENCHMARKS.md, \"Prediction on a CPU: against "
                    "transformers and ONNX Runtime\"); --quantize=none is as fast or faster on this CPU")
