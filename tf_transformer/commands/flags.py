"""Command-line flags made from the config dataclasses: one flag per field, named after it.

A field `warmup_steps: int` becomes `--warmup-steps N` with the field's `help`; a bool field
becomes `--name/--no-name`; `positive` fields take positive values only and `choices` fields
their choices (`none` is the word for None). A tuple field is a repeatable flag when its
metadata says `repeatable` (`--dataset A --dataset B`), else one comma-separated list
(`--dataset-weights 0.5,0.5`). A flag's argparse default is None ("not given"),
so that a command applies only the flags given; the help shows the value that applies instead,
e.g. the chosen preset's (`show_defaults`).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterable


def flag_name(field_name: str) -> str:
    """The flag of a field: `warmup_steps` -> `--warmup-steps`."""
    return "--" + field_name.replace("_", "-")


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


def comma_list(item_type: type):
    """argparse type: `1,2.5` -> `(1.0, 2.5)` with `item_type` (float here) for each item."""

    def parse(text: str) -> tuple:
        try:
            return tuple(item_type(item) for item in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {item_type.__name__}s, got {text!r}"
            ) from None

    parse.__name__ = f"list of {item_type.__name__}"
    return parse


def _without_none(hint) -> type:
    """`int | None` -> `int`."""
    if typing.get_origin(hint) is tuple:
        return hint
    types = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
    return types[0]


def add_config_flags(
    group, config_class: type, *, skip: Iterable[str] = ()
) -> list[argparse.Action]:
    """Adds a flag for each field of `config_class` except `skip`; returns their actions.

    Each action's `dest` is the field name and its default None (not given); its help ends
    with "(default: ...)", filled in by `show_defaults`.
    """
    actions = []
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if field.name in skip:
            continue
        metadata = field.metadata
        value_type = _without_none(hints[field.name])
        options = {"dest": field.name, "default": None, "metavar": metadata.get("metavar")}
        if value_type is bool:
            options = {"dest": field.name, "default": None}
            options["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(value_type) is tuple:
            item_type = typing.get_args(value_type)[0]
            if metadata.get("repeatable"):
                options.update(action="append", type=item_type)
            else:
                options["type"] = comma_list(item_type)
        elif metadata.get("choices"):
            none = metadata.get("none")
            options["choices"] = [none if c is None else c for c in metadata["choices"]]
            options["metavar"] = None  # argparse lists the choices
        elif value_type in (int, float):
            options["metavar"] = options["metavar"] or ("N" if value_type is int else None)
            positive = {int: positive_int, float: positive_float}[value_type]
            options["type"] = positive if metadata.get("positive") else value_type
        help_text = metadata["help"].replace("%", "%%") + " (default: %(shown)s)"
        action = group.add_argument(flag_name(field.name), help=help_text, **options)
        action.field, action.config_class = field, config_class
        actions.append(action)
    show_defaults(actions)
    return actions


def _shown(value, field: dataclasses.Field) -> str:
    if value is None:  # the flag's word for None, or what None stands for
        return field.metadata.get("none") or field.metadata.get("unset") or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or field.metadata.get("unset") or "none"
    return str(value)


def show_defaults(actions: Iterable[argparse.Action], *configs) -> None:
    """Sets the default each flag's help shows: its field's value in the one of `configs` of
    its config class (the field's own default when none is)."""
    for action in actions:
        config = next((c for c in configs if isinstance(c, action.config_class)), None)
        value = action.field.default if config is None else getattr(config, action.field.name)
        action.shown = _shown(value, action.field)


def config_changes(args: argparse.Namespace, config_class: type) -> dict:
    """The fields of `config_class` given as flags (a `none` word made None)."""
    changes = {}
    for field in dataclasses.fields(config_class):
        value = getattr(args, field.name, None)
        if value is not None:
            changes[field.name] = None if value == field.metadata.get("none") else value
    return changes
