"""`TrainResult`: what a training call, the custom loop's or `model.fit`'s, did."""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass
class TrainResult:
    """What a training call (the custom loop or `model.fit`) did.

    Attributes:
      model: the trained model.
      step: optimizer steps taken in total (across resumes).
      epoch: completed epochs.
      stopped_by: "SIGINT"/"SIGTERM" when a signal stopped the run, "max_steps",
        "max_minutes" (the wall-clock budget), "patience" (dev BLEU stopped improving),
        "another worker" (a signal or time budget seen by another worker of a multi-worker
        job), or None when all epochs ran.
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
    stopped_by: str | None
    checkpoint: str | None
    averaged_checkpoint: str | None = None
    history: list[dict] = dataclasses.field(default_factory=list)
    evaluations: list[dict] = dataclasses.field(default_factory=list)
    eval_seconds: float = 0.0
    best_checkpoint: str | None = None
