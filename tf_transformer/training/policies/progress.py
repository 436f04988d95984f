"""Where a training call stands (`Progress`), and the `Policy` base that reads it.

The policies are Keras callbacks. `model.fit` calls them itself; the custom loop (`EpochLoop`)
calls the same callbacks through a `tf.keras.callbacks.CallbackList`, so the two differ only in
who calls the step. Every policy reads where the run stands from one `Progress` (the step, the
epoch, the batches of the epoch: the `TrainState` that the checkpoints save), which the loop
advances itself and `FitProgress` keeps up to date under `model.fit`.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tf_transformer.training.checkpoints import TrainState
from tf_transformer.training.result import StopReason


@dataclasses.dataclass(eq=False, kw_only=True)
class Progress:
    """Where a training call stands: read by every policy, advanced by whoever calls the step.

    Attributes:
      state: the run's counters (step, epoch, position), saved in its checkpoints.
      batches_per_epoch: the size of an epoch once known (the loop counts its first epoch;
        under `model.fit`, its `steps` per epoch when it knows them), in `position`'s units.
      stopped_by: why a policy stopped the run (see `TrainResult.stopped_by`).
    """

    state: TrainState = dataclasses.field(default_factory=TrainState)
    batches_per_epoch: int | None = None
    stopped_by: StopReason | None = None

    @property
    def step(self) -> int:
        return int(self.state.step.numpy())

    @property
    def epoch(self) -> int:
        return int(self.state.epoch.numpy())

    @property
    def position(self) -> int:
        return int(self.state.position.numpy())

    def key(self) -> tuple[int, int, int]:
        """The state as a tuple: a checkpoint of an equal key would save nothing new."""
        return self.step, self.epoch, self.position


class Policy(tf.keras.callbacks.Callback):
    """A callback that reads `progress` and may stop the run."""

    def __init__(self, *, progress: Progress):
        super().__init__()
        self.progress = progress

    def stop(self, reason: StopReason | None) -> None:
        """Ends the run after this step; the first reason given is the one kept."""
        if not self.model.stop_training:
            self.progress.stopped_by = reason
        self.model.stop_training = True


class FitProgress(Policy):
    """Keeps `progress` up to date under `model.fit` (the custom loop advances it itself).

    `position` counts `fit`'s steps of the epoch; the step is the optimizer's update count.
    """

    def on_train_begin(self, logs=None):
        # After Keras' `BackupAndRestore`, which may have restored an epoch's end.
        self._update(0)

    def on_epoch_begin(self, epoch, logs=None):
        self.progress.state.epoch.assign(epoch)
        self.progress.batches_per_epoch = self.params.get("steps")
        self._update(0)

    def on_train_batch_begin(self, batch, logs=None):
        self._update(batch)

    def on_train_batch_end(self, batch, logs=None):
        self._update(batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        self.progress.state.epoch.assign(epoch + 1)
        self.progress.state.position.assign(0)

    def _update(self, position: int) -> None:
        self.progress.state.step.assign(self.model.optimizer.iterations)
        self.progress.state.position.assign(position)
