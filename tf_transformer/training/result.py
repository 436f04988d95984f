"""`TrainResult`: what a training call, the custom loop's or `model.fit`'s, did; `StopReason`:
why it stopped."""

from __future__ import annotations

import dataclasses
import enum

import tensorflow as tf


class StopReason(str, enum.Enum):
    """Why a training call stopped before running all its epochs (`TrainResult.stopped_by`).

    Each is equal to its value, a string (`StopReason.MAX_STEPS == "max_steps"`).
    """

    SIGINT = "SIGINT"  # a signal: the run saved and can resume
    SIGTERM = "SIGTERM"
    MAX_STEPS = "max_steps"  # its limits
    MAX_MINUTES = "max_minutes"
    PATIENCE = "patience"  # dev BLEU stopped improving
    ANOTHER_WORKER = "another worker"  # a signal or time budget seen by another worker

    def __str__(self) -> str:
        return self.value

    @property
    def by_signal(self) -> bool:
        """Stopped by SIGINT or SIGTERM (`train --resume` continues it)."""
        return self in (StopReason.SIGINT, StopReason.SIGTERM)


@dataclasses.dataclass
class TrainResult:
    """What a training call (the custom loop or `model.fit`) did.

    Attributes:
      model: the trained model.
      step: optimizer steps taken in total (across resumes).
      epoch: completed epochs.
      stopped_by: the `StopReason` (SIGINT/SIGTERM, max_steps, max_minutes, patience,
        another worker), or None when all epochs ran.
      checkpoint: the last checkpoint written (or restored).
      averaged_checkpoint: the averaged checkpoint, when `average_last` asked for one.
      history: one dict per epoch finished in this call (loss, accuracy, val_loss, ...).
      evaluations: one `Evaluation.to_dict()` per validation in this call (`eval_every`).
      eval_seconds: the time those took, spent inside the training budget.
      best_checkpoint: the best checkpoint by dev BLEU (`checkpoints/best/`), if any.
    """

    model: tf.keras.Model
    step: int
    epoch: int
    stopped_by: StopReason | None
    checkpoint: str | None
    averaged_checkpoint: str | None = None
    history: list[dict] = dataclasses.field(default_factory=list)
    evaluations: list[dict] = dataclasses.field(default_factory=list)
    eval_seconds: float = 0.0
    best_checkpoint: str | None = None
