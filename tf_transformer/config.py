"""Frozen configuration dataclasses and named presets."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the encoder-decoder Transformer (paper names throughout).

    Defaults are the paper's base model ("Attention Is All You Need", Table 3).
    """

    num_layers: int = 6  # N: encoder layers = decoder layers
    d_model: int = 512  # model width
    num_heads: int = 8  # h: attention heads, head size d_model / num_heads
    dff: int = 2048  # inner width of the position-wise feed-forward network
    dropout_rate: float = 0.1  # P_drop
    input_vocab_size: int = 8000  # source (Portuguese) vocabulary
    target_vocab_size: int = 8000  # target (English) vocabulary
    max_length: int = 512  # longest sequence the positional table covers
    norm_first: bool = False  # False: post-norm as in the paper; True: pre-norm
    positional_layout: str = "interleaved"  # "interleaved" (paper) or "concat" (tutorial)
    share_target_embeddings: bool = False  # tie the output projection to target embeddings

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})."
            )
        if self.positional_layout not in ("interleaved", "concat"):
            raise ValueError(
                f"positional_layout must be 'interleaved' or 'concat', got "
                f"{self.positional_layout!r}."
            )
        for name in ("num_layers", "d_model", "num_heads", "dff", "max_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}.")

    def replace(self, **changes: Any) -> ModelConfig:
        """Returns a copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown ModelConfig fields: {unknown}. Known: {sorted(known)}.")
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# Named presets. Vocabulary sizes are placeholders: training replaces them with the sizes of the
# tokenizers it builds.
PRESETS: dict[str, ModelConfig] = {
    # Tests and smoke runs: seconds on a CPU.
    "tiny": ModelConfig(
        num_layers=2, d_model=32, num_heads=2, dff=64, dropout_rate=0.0, max_length=64
    ),
    # A small model for the sample corpus and laptops.
    "small": ModelConfig(
        num_layers=2, d_model=128, num_heads=4, dff=512, dropout_rate=0.1, max_length=128
    ),
    # The TensorFlow tutorial's model.
    "tutorial": ModelConfig(
        num_layers=4,
        d_model=128,
        num_heads=8,
        dff=512,
        dropout_rate=0.1,
        input_vocab_size=7765,
        target_vocab_size=7010,
        max_length=512,
    ),
    # The paper's base model.
    "base": ModelConfig(),
}


def get_preset(name: str) -> ModelConfig:
    """Returns the named preset; raises ValueError naming the valid presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}.") from None
