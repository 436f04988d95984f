"""The base of the config dataclasses: fields with help text, checks made from it, dicts."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, ClassVar

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.errors import DeprecatedName


def setting(default: Any, help: str, **metadata: Any) -> Any:
    """A config field: `dataclasses.field(default=..., metadata={"help": ..., ...})`.

    Metadata beside `help`: `positive` (checked in `__post_init__`; the flag refuses other
    values), `choices`, `none` (the flag's word for None, e.g. "float32"), `unset` (what None
    stands for, shown as the flag's default) and `metavar`.
    """
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


_WARNED: set[str] = set()


def warn_deprecated(old: str, new: str) -> None:
    """Says once per process that `old` (a flag or config.json key) is now `new`."""
    if old not in _WARNED:
        _WARNED.add(old)
        warnings.warn(f"{old} is deprecated: use {new}.", DeprecatedName, stacklevel=3)


class _DictConfig:
    """What the frozen config dataclasses share: checks from field metadata, `replace`,
    `to_dict` and `from_dict`."""

    # Keys written by earlier versions, and the fields they became.
    RENAMED: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value, metadata = getattr(self, field.name), field.metadata
            if value is None:
                continue
            if metadata.get("positive") and not value > 0:
                raise ValueError(f"{field.name} must be positive, got {value}.")
            choices = metadata.get("choices")
            if choices and value not in choices:
                allowed = ", ".join(repr(choice) for choice in choices)
                raise ValueError(f"{field.name} must be one of {allowed}; got {value!r}.")

    def replace(self, **changes: Any) -> Self:
        """Returns a copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """Builds from `to_dict()` output (old key names are read, with a warning once);
        unknown keys are refused by name."""
        renamed = {}
        for key, value in values.items():
            if key in cls.RENAMED:
                warn_deprecated(f"{cls.__name__} key {key!r}", repr(cls.RENAMED[key]))
            renamed[cls.RENAMED.get(key, key)] = value
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(renamed) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} fields: {unknown}. Known: {sorted(known)}.")
        return cls(**renamed)


def _check_unit_interval(config, names, *, closed: bool = False) -> None:
    """Each of `names` in [0, 1) ([0, 1] when `closed`)."""
    for name in names:
        value = getattr(config, name)
        if not (0.0 <= value <= 1.0 if closed else 0.0 <= value < 1.0):
            raise ValueError(f"{name} must be in [0, {'1]' if closed else '1)'}, got {value}.")
