"""The base of the config dataclasses: fields with help text, checks made from it, dicts."""

from __future__ import annotations

import dataclasses
from typing import Any

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.errors import InvalidValueError


def setting(default: Any, help: str, **metadata: Any) -> Any:
    """A config field: `dataclasses.field(default=..., metadata={"help": ..., ...})`.

    Metadata beside `help`: `positive` (checked in `__post_init__`; the flag refuses other
    values), `choices`, `none` (the flag's word for None, e.g. "float32"), `unset` (what None
    stands for, shown as the flag's default) and `metavar`.
    """
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


class _DictConfig:
    """What the frozen config dataclasses share: checks from field metadata, `replace`,
    `to_dict` and `from_dict`."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value, metadata = getattr(self, field.name), field.metadata
            if value is None:
                continue
            if metadata.get("positive") and not value > 0:
                raise InvalidValueError(f"{field.name} must be positive, got {value}.")
            choices = metadata.get("choices")
            if choices and value not in choices:
                allowed = ", ".join(repr(choice) for choice in choices)
                raise InvalidValueError(f"{field.name} must be one of {allowed}; got {value!r}.")

    def replace(self, **changes: Any) -> Self:
        """Returns a copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """Builds from `to_dict()` output; unknown keys are refused by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidValueError(
                f"Unknown {cls.__name__} fields: {unknown}. Known: {sorted(known)}."
            )
        return cls(**values)


def _check_unit_interval(config, names, *, closed: bool = False) -> None:
    """Each of `names` in [0, 1) ([0, 1] when `closed`)."""
    for name in names:
        value = getattr(config, name)
        if not (0.0 <= value <= 1.0 if closed else 0.0 <= value < 1.0):
            raise InvalidValueError(
                f"{name} must be in [0, {'1]' if closed else '1)'}, got {value}."
            )
