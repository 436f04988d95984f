"""Mixed precision: the Keras dtype policy of a run, and what `mixed_precision="auto"` chooses.

bfloat16 pays only where it runs natively: its train step measured 1.04-1.08x float32 on CPUs
with AVX512_BF16, 0.87x on an AVX2-only AMD EPYC where oneDNN emulates it
(docs/benchmarks/training.md). "auto" therefore takes bfloat16 where the CPU has AVX512_BF16 or
AMX-BF16 (within `ONEDNN_MAX_CPU_ISA`, see `tf_transformer.hardware.cpu`) or a GPU is visible,
and float32 elsewhere. A training call resolves it once, when it starts
(`training.session.Session.open`), and records the choice and the reason in config.json;
everything after sees the resolved value. A resumed run that chose by "auto" chooses again, for
the machine it resumes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tf_transformer.errors import InvalidValueError
from tf_transformer.hardware.cpu import CpuFeatures, cpu_features

AUTO = "auto"
_POLICIES = {None: "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
# The reason of a value set in the config rather than chosen by "auto".
CONFIGURED = "as configured"
# The features that make bfloat16 native: (its name in a reason, `CpuFeatures.has`'s name).
_NATIVE_BFLOAT16 = (("avx512_bf16", "avx512_bf16"), ("amx-bf16", "amx"))


@dataclasses.dataclass(frozen=True)
class Precision:
    """A run's mixed precision, resolved: the `TrainConfig.mixed_precision` value and why.

    Attributes:
      value: None (float32), "float16" or "bfloat16"; never "auto".
      reason: why, e.g. "auto: the CPU has avx512_bf16" or "as configured".
      auto: whether "auto" chose it (a resumed run then chooses again, for its machine).
    """

    value: str | None
    reason: str
    auto: bool = False

    @property
    def name(self) -> str:
        """The dtype's name: "float32" for None."""
        return self.value or "float32"

    def line(self) -> str:
        """The run's first log line: `mixed precision: bfloat16 (auto: the CPU has ...)`."""
        return f"mixed precision: {self.name} ({self.reason})"

    def record(self) -> dict:
        """What config.json keeps beside the value in "train": `{"auto", "chosen", "reason"}`."""
        return {"auto": self.auto, "chosen": self.name, "reason": self.reason}

    @staticmethod
    def chosen_by_auto(record: dict | None, value: str | None) -> bool:
        """Whether a config.json `record` says "auto" chose `value` (False for runs written
        before "auto", which have no record)."""
        return bool(record and record.get("auto") and record.get("chosen") == (value or "float32"))


def _without_bfloat16(cpu: CpuFeatures) -> str:
    """Why `cpu` has no native bfloat16: "avx512_bf16 and amx-bf16 absent", or which the
    ISA limit hides."""
    states = {
        name: f"limited by {cpu.limit_variable}={cpu.isa_limit}" if cpu.limited(flag) else "absent"
        for name, flag in _NATIVE_BFLOAT16
    }
    if len(set(states.values())) == 1:
        return f"avx512_bf16 and amx-bf16 {states['avx512_bf16']}"
    return ", ".join(f"{name} {state}" for name, state in states.items())


def resolve_mixed_precision(
    mixed_precision: str | None,
    *,
    cpu: CpuFeatures | None = None,
    gpus: Sequence | None = None,
) -> Precision:
    """`TrainConfig.mixed_precision` resolved: "auto" becomes "bfloat16" or None (float32).

    Args:
      mixed_precision: None, "float16", "bfloat16" (kept, "as configured") or "auto".
      cpu: the CPU to decide for (default: this machine's, `hardware.cpu.cpu_features`).
      gpus: the visible GPUs (default: `tf.config.list_physical_devices("GPU")`).

    Raises:
      ValueError: another value.
    """
    if mixed_precision != AUTO:
        policy_name(mixed_precision)  # refuses an unknown value
        return Precision(mixed_precision, CONFIGURED)
    if gpus is None:
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return Precision("bfloat16", "auto: a GPU is visible", auto=True)
    cpu = cpu or cpu_features()
    native = [name for name, feature in _NATIVE_BFLOAT16 if cpu.has(feature)]
    if native:
        return Precision("bfloat16", f"auto: the CPU has {' and '.join(native)}", auto=True)
    reason = f"auto: no native bfloat16 on this CPU: {_without_bfloat16(cpu)}"
    return Precision(None, reason, auto=True)


def policy_name(mixed_precision: str | None) -> str:
    """The Keras dtype policy for `TrainConfig.mixed_precision` (None, "float16", "bfloat16";
    "auto" is resolved first, by `resolve_mixed_precision`)."""
    if mixed_precision == AUTO:
        mixed_precision = resolve_mixed_precision(mixed_precision).value
    try:
        return _POLICIES[mixed_precision]
    except KeyError:
        raise InvalidValueError(
            f"mixed_precision must be None, 'float16', 'bfloat16' or 'auto', got "
            f"{mixed_precision!r}."
        ) from None
