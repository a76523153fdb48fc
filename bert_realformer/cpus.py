"""How many CPUs this process may use (its affinity mask, capped by a cgroup CPU quota), which
instruction sets they have, whether a strategy runs on CPUs alone, and the input pipelines that
feed CPUs.

`os.cpu_count()` counts the host's cores, which in a container or under `taskset` is more
than the process gets; worker pools sized by it oversubscribe the CPUs they really have.
"""

import math
import os

CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: "<quota> <period>" or "max <period>"
CPU_INFO = "/proc/cpuinfo"


def _cgroup_quota(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def usable_cpu_count(cgroup_cpu_max: str = CGROUP_CPU_MAX) -> int:
    """CPUs this process may run on (at least 1)."""
    if hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:  # macOS, Windows
        count = os.cpu_count() or 1
    quota = _cgroup_quota(cgroup_cpu_max)
    return max(1, min(count, quota) if quota else count)


# The instruction sets that decide which kernels TensorFlow (oneDNN), XNNPACK, XLA and ONNX
# Runtime pick: what a measurement's CPU has to be named by, beside its model.
KERNEL_INSTRUCTION_SETS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni",
                           "amx_tile", "amx_bf16", "amx_int8")


def _first_cpu(cpu_info: str) -> dict[str, str]:
    """The first CPU's `key: value` lines of `cpu_info` (empty where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        with open(cpu_info, encoding="ascii", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_flags(cpu_info: str = CPU_INFO) -> frozenset[str]:
    """The instruction-set flags Linux lists for the first CPU (empty where it lists none)."""
    return frozenset(_first_cpu(cpu_info).get("flags", "").split())


def cpu_description(cpu_info: str = CPU_INFO) -> dict:
    """The first CPU as Linux lists it: `model_name`, `vendor`, `family` and `model` (ints; an
    AMD Zen 3 is family 25 model 1, a Zen 4 family 25 model 17) and which of
    `KERNEL_INSTRUCTION_SETS` it has; an empty dict where it lists none (not Linux)."""
    fields = _first_cpu(cpu_info)
    if not fields:
        return {}
    flags = set(fields.get("flags", "").split())

    def number(key):
        return int(fields[key]) if fields.get(key, "").isdigit() else None
    return {"model_name": fields.get("model name", ""), "vendor": fields.get("vendor_id", ""),
            "family": number("cpu family"), "model": number("model"),
            "instruction_sets": [name for name in KERNEL_INSTRUCTION_SETS if name in flags]}


def cpu_tag(cpu_info: str = CPU_INFO) -> str:
    """`cpu-f<family>-m<model>`: what a benchmark's result file is named by (`cpu-f25-m1`)."""
    cpu = cpu_description(cpu_info)
    return f"cpu-f{cpu.get('family')}-m{cpu.get('model')}"


def cpu_summary(description: dict) -> str:
    """`cpu_description`'s dict in one line: `AMD EPYC 7B13, family 25 model 1 (avx2 fma)`."""
    if not description:
        return "CPU not described by this system"
    name = description["model_name"] or description["vendor"] or "CPU"
    if description["family"] is not None:
        name += f", family {description['family']} model {description['model']}"
    return f"{name} ({' '.join(description['instruction_sets']) or 'no AVX2'})"


def on_cpus(strategy) -> bool:
    """Whether the strategy's replicas are all CPUs."""
    import tensorflow as tf
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: TensorFlow's default device, a GPU where there is one
        return not tf.config.list_logical_devices("GPU")
    return all(tf.DeviceSpec.from_string(device).device_type == "CPU" for device in devices)


def without_autotuning(dataset):
    """`dataset` with tf.data's autotuning off (its parallel stages at their initial parallelism),
    for pipelines feeding CPUs. On a few CPU cores its tuning competes with the model: some
    `predict` calls at batch 1 took much longer than others, and releasing an iterator waits for
    its tuning thread, which sleeps between rounds (a stall of many seconds at a run's end). The
    demo's pretraining input reads as fast or faster without it."""
    import tensorflow as tf
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
