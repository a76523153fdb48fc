"""Which kernels TensorFlow runs on this CPU: oneDNN's wherever they beat its own.

TensorFlow's Linux wheels hold two sets of CPU kernels: oneDNN's, which pick their instructions
when they run (AVX2 and FMA, AVX-512, AMX), and TensorFlow's own (Eigen), compiled for AVX
without FMA. TensorFlow turns oneDNN's on by default only where the CPU has AVX512_VNNI,
AVX512_BF16, AVX_VNNI or AMX; on an x86 CPU with AVX2 and FMA but none of those (AMD's first
three Zen generations, Intel Haswell to Comet Lake, Skylake-SP Xeons) it runs its own. There
oneDNN's are much faster for training and for batches, TensorFlow's own a little faster at batch 1
(BENCHMARKS.md, "The pretraining step on a CPU: kernels, XLA and the variants"). So the scripts
turn them on there, before
TensorFlow is imported, unless the user has set `TF_ENABLE_ONEDNN_OPTS` (0 gives TensorFlow's own
kernels back).

On a CPU without bf16 (fp16) instructions, `--mixed_precision=bf16` (`fp16`) runs slower than
float32: the scripts say so in one warning (`slow_precision_warning`). So they do where
`--quantize=int8` gains nothing over float32 (`slow_int8_warning`): AMD's Zen and Zen+ cores.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping, MutableMapping
from types import MappingProxyType

from bert_realformer.cpus import cpu_description, cpu_flags

ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"
_X86_64 = ("x86_64", "amd64")
# The instructions that multiply in each half precision (oneDNN's kernels for it run on them).
# Without them a half precision saves no arithmetic and costs conversions.
HALF_PRODUCTS = MappingProxyType({"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")})
# Where the warnings' claims were measured.
PRECISION_MEASURED = 'BENCHMARKS.md, "Mixed precision and int8"'
INT8_MEASURED = 'BENCHMARKS.md, "Prediction on a CPU: against transformers and ONNX Runtime"'
# AMD's first Zen cores (Zen, Zen+: family 23, models below 48; Zen 2 begins at 48), where int8's
# products gain nothing over float32's (why was not profiled; unlike the Zen 2, these cores run each
# 256-bit instruction as two 128-bit halves).
_ZEN1_FAMILY, _ZEN2_FIRST_MODEL = 23, 48


def turn_on_onednn(environ: MutableMapping[str, str], flags: frozenset[str] | None = None,
                   machine: str | None = None, modules: Mapping[str, object] | None = None) -> bool:
    """Sets `TF_ENABLE_ONEDNN_OPTS=1` in `environ` on x86-64 Linux with AVX2 and FMA, unless the
    user set it or TensorFlow is already imported (it reads the switch once, on import); True
    when it set it. (`flags`, `machine`, `modules`: this CPU's, this machine's, `sys.modules`.)"""
    if ONEDNN_SWITCH in environ or "tensorflow" in (sys.modules if modules is None else modules):
        return False
    if not sys.platform.startswith("linux") or (machine or platform.machine()).lower() not in _X86_64:
        return False
    if not {"avx2", "fma"} <= (cpu_flags() if flags is None else flags):
        return False
    environ[ONEDNN_SWITCH] = "1"
    return True


def slow_precision_warning(mixed_precision: str, on_cpus: bool,
                           flags: frozenset[str] | None = None, cpu_name: str | None = None) -> str | None:
    """The line to warn with when `--mixed_precision` asks for bf16 or fp16 on CPUs alone
    (`on_cpus`: the strategy's replicas are all CPUs) and this CPU lists none of the instructions
    that multiply in it (`HALF_PRODUCTS`), where it runs slower than float32; None otherwise
    (float32, a GPU or TPU, a CPU with them, or one whose instruction sets Linux does not list).
    (`flags`, `cpu_name`: this CPU's.)"""
    if mixed_precision not in HALF_PRODUCTS or not on_cpus:
        return None
    flags = cpu_flags() if flags is None else flags
    if not flags or any(name in flags for name in HALF_PRODUCTS[mixed_precision]):
        return None
    name = cpu_description().get("model_name", "") if cpu_name is None else cpu_name
    wanted = " or ".join(instruction.upper() for instruction in HALF_PRODUCTS[mixed_precision])
    return (f"--mixed_precision={mixed_precision} on a CPU without {mixed_precision} instructions "
            f"({name or 'this CPU'}: no {wanted}): {mixed_precision} runs slower than float32 there "
            f"({PRECISION_MEASURED}); --mixed_precision=none is faster on this CPU")


def slow_int8_warning(engine: str, on_cpus: bool, cpu: Mapping[str, object] | None = None) -> str | None:
    """The line to warn with when the int8 prediction engine (`--quantize=int8`; `engine`: its
    name, `inference.engines`) runs on CPUs alone (`on_cpus`) and this CPU
    is an AMD Zen or Zen+ core (`cpu`: `cpus.cpu_description()`'s fields, this CPU's when None),
    where int8 runs no faster than float32; None otherwise."""
    if engine != "int8" or not on_cpus:
        return None
    cpu = cpu_description() if cpu is None else cpu
    model = cpu.get("model")
    if cpu.get("vendor") != "AuthenticAMD" or cpu.get("family") != _ZEN1_FAMILY or model is None \
            or model >= _ZEN2_FIRST_MODEL:
        return None
    return (f"--quantize=int8 on an AMD Zen or Zen+ core ({cpu.get('model_name') or 'this CPU'}, family "
            f"{_ZEN1_FAMILY} model {model}): int8 runs no faster than float32 there ({INT8_MEASURED}); "
            f"--quantize=none is as fast or faster on this CPU")
