"""`DecodeConfig`: the decoding settings of the Translator, the export and the CLI."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.config.base import _DictConfig, setting
from tf_transformer.errors import InvalidValueError


@dataclasses.dataclass(frozen=True)
class DecodeConfig(_DictConfig):
    """How to decode: the one set of settings of the Translator, the export and the CLI.

    Built once where a request comes in (the CLI's flags, `open_translator`, the export) and
    passed on as is. A field left at None takes its backend's own: for a `Translator` (a run
    directory) the defaults below, bounded by the model's positional table (`resolved`); for
    an exported SavedModel or a server, the export's settings.
    """

    beam_size: int | None = setting(
        None, "Beams per sentence; 1 = greedy.", positive=True, metavar="N", unset="4"
    )
    # The exponent of GNMT's length penalty (Wu et al. 2016, eq. 14). 1.0 scored at least as
    # well as 0.6 on Tatoeba dev in 24 of 29 small-data evaluations (up to +0.5 BLEU; the
    # others 0.1-0.15 lower), and better than 1.3 and 1.6 (bench/README.md, "Translation
    # quality"); the paper's 0.6 was tuned on WMT.
    length_penalty: float | None = setting(
        None,
        "GNMT length-penalty exponent of beam search (0: raw log-probabilities).",
        metavar="P",
        unset="1.0",
    )
    max_source_tokens: int | None = setting(
        None,
        "Source tokens kept per sentence, START/END included.",
        positive=True,
        metavar="N",
        unset="min(128, the model's max_length)",
    )
    max_new_tokens: int | None = setting(
        None,
        "Most tokens generated per sentence, END included.",
        positive=True,
        metavar="N",
        unset="min(128, the model's max_length)",
    )

    # The settings of a field left at None (`resolved`): both caps bounded by the model's
    # positional table.
    DEFAULT_BEAM_SIZE: ClassVar[int] = 4
    DEFAULT_LENGTH_PENALTY: ClassVar[float] = 1.0
    DEFAULT_LENGTH: ClassVar[int] = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.length_penalty is not None and self.length_penalty < 0:
            raise InvalidValueError(f"length_penalty must be >= 0, got {self.length_penalty}.")
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise InvalidValueError(f"{name} must be at least 2, got {value}.")

    def given(self) -> dict[str, Any]:
        """The fields set (not None): what a request asks of a backend."""
        return {name: value for name, value in self.to_dict().items() if value is not None}

    def resolved(self, model_max_length: int) -> Self:
        """Every field set: the defaults, the caps bounded by the model's positional table
        (checked)."""
        caps = {
            "beam_size": self.DEFAULT_BEAM_SIZE if self.beam_size is None else self.beam_size,
            "length_penalty": (
                self.DEFAULT_LENGTH_PENALTY if self.length_penalty is None else self.length_penalty
            ),
        }
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            value = min(self.DEFAULT_LENGTH, model_max_length) if value is None else value
            if value > model_max_length:
                raise InvalidValueError(
                    f"{name} ({value}) exceeds the model's positional table "
                    f"(max_length {model_max_length})."
                )
            caps[name] = value
        return self.replace(**caps)
