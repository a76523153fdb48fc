"""How many CPUs this process may use (its affinity mask, capped by a cgroup CPU quota), and
which instruction sets they have.

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


def cpu_flags(cpu_info: str = CPU_INFO) -> frozenset[str]:
    """The instruction-set flags Linux lists for the first CPU (empty where it lists none)."""
    try:
        with open(cpu_info, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()
