"""Mixed precision: the Keras dtype policy of a run."""

from __future__ import annotations

_POLICIES = {None: "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


def policy_name(mixed_precision: str | None) -> str:
    """The Keras dtype policy for `TrainConfig.mixed_precision` (None, "float16", "bfloat16")."""
    try:
        return _POLICIES[mixed_precision]
    except KeyError:
        raise ValueError(
            f"mixed_precision must be None, 'float16' or 'bfloat16', got {mixed_precision!r}."
        ) from None
