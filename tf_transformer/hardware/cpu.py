"""The CPU: its model, cores and the instruction sets that decide how fast bfloat16 runs.

bfloat16 is native on x86 CPUs with AVX512_BF16 (a bfloat16 dot product in AVX-512) or AMX-BF16
(Intel's tile unit); elsewhere oneDNN emulates it with float32 conversions, slower than float32
itself (0.87x on an AVX2-only AMD EPYC, docs/benchmarks/training.md). A user can make oneDNN, and so
TensorFlow, treat the CPU as a smaller one with `ONEDNN_MAX_CPU_ISA` (oneDNN's "CPU Dispatcher
Control"): instruction sets above the limit count as absent here too, and are reported as
limited. XLA:CPU has its own limit, `XLA_FLAGS=--xla_cpu_max_isa=AVX2`, which the description
reports.

    >>> print(cpu_features().describe())  # doctest: +SKIP
    cpu: AMD EPYC, 2 cores, avx2=yes avx512f=yes avx512_bf16=yes amx=no
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# oneDNN reads ONEDNN_MAX_CPU_ISA, else its older name.
ISA_LIMIT_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")

# oneDNN's ISA names, ranked: each includes those ranked below it (the AVX10 names are the new
# names of the AVX512_CORE_FP16 and AMX ones). DEFAULT (or an unknown name) is no limit.
_ISA_RANKS = {
    "SSE41": 0,
    "AVX": 1,
    "AVX2": 2,
    "AVX2_VNNI": 3,
    "AVX2_VNNI_2": 4,
    "AVX512_MIC": 5,  # Xeon Phi: AVX-512F, no bfloat16
    "AVX512_MIC_4OPS": 5,
    "AVX512_CORE": 5,
    "AVX512_CORE_VNNI": 6,
    "AVX512_CORE_BF16": 7,
    "AVX512_CORE_FP16": 8,
    "AVX10_1_512": 8,
    "AVX512_CORE_AMX": 9,
    "AVX10_1_512_AMX": 9,
    "AVX512_CORE_AMX_FP16": 10,
    "AVX10_1_512_AMX_FP16": 10,
    "AVX10_2_512": 11,
    "AVX10_2_512_AMX_2": 12,
}
# The lowest limit that still lets oneDNN use a feature (features absent here are never limited).
_NEEDS_RANK = {"avx2": 2, "avx512f": 5, "avx512_bf16": 7, "amx_bf16": 9, "amx_tile": 9}
# What the description and the dict report, in order; "amx" is amx_bf16 and amx_tile together.
REPORTED = ("avx2", "avx512f", "avx512_bf16", "amx")
# XLA:CPU's `--xla_cpu_max_isa` names below AVX-512 (its others, AVX512 and up, allow it).
_XLA_ISA_FLAG = re.compile(r"--xla_cpu_max_isa=(\S+)")


@dataclasses.dataclass(frozen=True)
class CpuFeatures:
    """What the CPU offers, and what `ONEDNN_MAX_CPU_ISA` lets oneDNN use of it.

    Attributes:
      model: the model name ("AMD EPYC"; "unknown" where it cannot be read).
      cores: logical CPUs.
      flags: the CPU's flags as /proc/cpuinfo spells them ("avx2", "avx512_bf16", ...).
      isa_limit: the `ONEDNN_MAX_CPU_ISA` value in force, upper-cased (None: no limit).
      limit_variable: the variable that set it.
      xla_limit: XLA:CPU's `--xla_cpu_max_isa` in `XLA_FLAGS`, upper-cased (None: no limit).
    """

    model: str
    cores: int
    flags: frozenset[str]
    isa_limit: str | None = None
    limit_variable: str = ISA_LIMIT_VARIABLES[0]
    xla_limit: str | None = None

    def limited(self, feature: str) -> bool:
        """Whether the CPU has `feature` but the ISA limit keeps oneDNN from using it."""
        if feature == "amx":
            return any(self.limited(name) for name in ("amx_bf16", "amx_tile"))
        rank = _ISA_RANKS.get(self.isa_limit or "")
        return feature in self.flags and rank is not None and rank < _NEEDS_RANK[feature]

    def has(self, feature: str) -> bool:
        """Whether `feature` ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile" or
        "amx": both) is there for oneDNN to use: on the CPU and within the ISA limit."""
        if feature == "amx":
            return self.has("amx_bf16") and self.has("amx_tile")
        return feature in self.flags and not self.limited(feature)

    @property
    def native_bfloat16(self) -> bool:
        """bfloat16 arithmetic in hardware: AVX512_BF16 or AMX-BF16 (within the ISA limit)."""
        return self.has("avx512_bf16") or self.has("amx")

    def state(self, feature: str) -> str:
        """`feature`'s word in the description: "yes", "no" or "no (limited by ...)"."""
        if self.limited(feature):
            return f"no (limited by {self.limit_variable}={self.isa_limit})"
        return "yes" if self.has(feature) else "no"

    def describe(self) -> str:
        """One line: `cpu: AMD EPYC, 2 cores, avx2=yes avx512f=yes avx512_bf16=yes amx=no`."""
        features = " ".join(f"{name}={self.state(name)}" for name in REPORTED)
        xla = f" (XLA limited to {self.xla_limit})" if self.xla_limit else ""
        return f"cpu: {self.model}, {self.cores} cores, {features}{xla}"

    def to_dict(self) -> dict:
        """The JSON form: model, cores, each reported feature (true/false after the limit),
        the features the limit hides, and the limit."""
        return {
            "model": self.model,
            "cores": self.cores,
            **{name: self.has(name) for name in REPORTED},
            "limited": [name for name in REPORTED if self.limited(name)],
            "isa_limit": self.isa_limit,
            "xla_limit": self.xla_limit,
        }


def isa_limit(environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """`(limit, variable)`: the ISA limit set in `environ` (default: `os.environ`), upper-cased,
    or None when there is none (unset, empty or "DEFAULT")."""
    environ = os.environ if environ is None else environ
    for variable in ISA_LIMIT_VARIABLES:
        value = environ.get(variable, "").strip().upper()
        if value:
            return (None if value in ("DEFAULT", "ALL") else value), variable
    return None, ISA_LIMIT_VARIABLES[0]


def parse_cpuinfo(text: str, environ: Mapping[str, str] | None = None) -> CpuFeatures:
    """The `CpuFeatures` of a /proc/cpuinfo text (x86 "flags", or Arm "Features"), under the ISA
    limit of `environ` (default: `os.environ`)."""
    model, cores, flags = None, 0, frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor":
            cores += 1
        elif key in ("model name", "hardware") and model is None and value:
            model = value
        elif key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
    limit, variable = isa_limit(environ)
    xla = _XLA_ISA_FLAG.findall((os.environ if environ is None else environ).get("XLA_FLAGS", ""))
    return CpuFeatures(
        model=model or platform.processor() or platform.machine() or "unknown",
        cores=cores or os.cpu_count() or 1,
        flags=flags,
        isa_limit=limit,
        limit_variable=variable,
        xla_limit=xla[-1].upper() if xla else None,
    )


@functools.cache
def _cpuinfo_text() -> str:
    try:
        return CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: the model and core count from `platform` and `os`, no flags
        return ""


def cpu_features() -> CpuFeatures:
    """This machine's `CpuFeatures` (/proc/cpuinfo, read once), under the ISA limit set now."""
    return parse_cpuinfo(_cpuinfo_text())


def describe_cpu() -> str:
    """This machine's one-line description (`CpuFeatures.describe`)."""
    return cpu_features().describe()
