"""What a resumed run may change: its limits and how it runs, never what it learns.

`training.run` applies these rules whoever calls it (the CLI's `train --resume`, a notebook,
`bench/quality.py`), so a run resumes the same way from Python as from the command line.
"""

from __future__ import annotations

import dataclasses

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.training.step.mixed_precision import AUTO

# The `TrainConfig` fields a resumed run may change. Everything else (the model, the data
# pipeline, the optimizer and its schedule) is the run's, as its config.json records it: a
# change there would make the checkpoints continue a different training.
RESUMABLE = (
    "epochs",
    "max_steps",
    "max_minutes",
    "average_last",
    "checkpoint_every",
    "strategy",
    "accumulate_steps",
    "eval_every",
    "patience",
)
# Filled in from the run's tokenizers, so a new run's placeholders may differ.
_VOCAB_SIZES = ("input_vocab_size", "target_vocab_size")


def apply_train_changes(config: TrainConfig, changes: dict | None) -> TrainConfig:
    """`config` with `changes` applied. A `max_steps` changed without `epochs` lifts the epoch
    limit: the steps alone bound the run (with `max_minutes`), not epochs set earlier."""
    changes = dict(changes or {})
    if changes.get("max_steps") is not None and "epochs" not in changes:
        changes["epochs"] = None
    return config.replace(**changes)


def _differences(stored, given, skip=()) -> dict[str, tuple]:
    """`{field: (stored value, given value)}` where the two configs differ."""
    return {
        f.name: (getattr(stored, f.name), getattr(given, f.name))
        for f in dataclasses.fields(stored)
        if f.name not in skip and getattr(stored, f.name) != getattr(given, f.name)
    }


def _refuse(what: str, differences: dict[str, tuple], hint: str) -> None:
    if differences:
        listed = ", ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in differences.items())
        raise InvalidValueError(
            f"a resumed run keeps its {what}; asked to change {listed}. {hint} Or start a new "
            "run (another run directory, or overwrite)."
        )


def resumed_configs(
    stored_model: ModelConfig,
    stored_train: TrainConfig,
    *,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    train_changes: dict | None = None,
) -> tuple[ModelConfig, TrainConfig]:
    """The configs a resumed run trains with: its own, with the changes a resume may make.

    Args:
      stored_model, stored_train: the run's configs (config.json).
      model_config: None, or the same model (its vocabulary sizes may be placeholders).
      train_config: None, or the run's training config with only `RESUMABLE` fields changed
        (a `mixed_precision` of "auto" is taken as the run's own value: config.json holds what
        "auto" chose, and a call of a run that chose by "auto" chooses again, see
        `training.session.run_precision`).
      train_changes: `TrainConfig` fields to change (`RESUMABLE` ones; see
        `apply_train_changes`).

    Raises:
      ValueError: a change a resume may not make, naming the fields and their values.
    """
    if model_config is not None:
        _refuse("model", _differences(stored_model, model_config, skip=_VOCAB_SIZES), "")
    given = train_config or stored_train
    resumed = apply_train_changes(given, train_changes)
    if resumed.mixed_precision == AUTO:  # "auto" is how the run chose (`Session.open` again)
        resumed = resumed.replace(mixed_precision=stored_train.mixed_precision)
    _refuse(
        "training settings",
        _differences(stored_train, resumed, skip=RESUMABLE),
        f"A resume may change {', '.join(RESUMABLE)}.",
    )
    return stored_model, resumed
