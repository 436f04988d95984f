"""`DecodeConfig`: the decoding defaults of the Translator, the export and the CLI."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.config.base import _DictConfig, setting


@dataclasses.dataclass(frozen=True)
class DecodeConfig(_DictConfig):
    """How to decode: the one set of defaults of the Translator, the export and the CLI."""

    beam_size: int = setting(4, "Beams per sentence; 1 = greedy.", positive=True)
    # The exponent of GNMT's length penalty (Wu et al. 2016, eq. 14). 1.0 scored at least as
    # well as 0.6 on Tatoeba dev in 24 of 29 small-data evaluations (up to +0.5 BLEU; the
    # others 0.1-0.15 lower), and better than 1.3 and 1.6 (bench/README.md, "Translation
    # quality"); the paper's 0.6 was tuned on WMT.
    length_penalty: float = setting(
        1.0,
        "GNMT length-penalty exponent of beam search (0: raw log-probabilities).",
        metavar="P",
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

    # Both caps when unset, bounded by the model's positional table.
    DEFAULT_LENGTH: ClassVar[int] = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {self.length_penalty}.")
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be at least 2, got {value}.")

    def resolved(self, model_max_length: int) -> Self:
        """Both caps set: the defaults bounded by the model's positional table (checked)."""
        caps = {}
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            value = min(self.DEFAULT_LENGTH, model_max_length) if value is None else value
            if value > model_max_length:
                raise ValueError(
                    f"{name} ({value}) exceeds the model's positional table "
                    f"(max_length {model_max_length})."
                )
            caps[name] = value
        return self.replace(**caps)
