"""`EpochLoop`: the custom loop's epochs and steps, calling the callbacks as `model.fit` does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from tf_transformer.training.logs import Totals
from tf_transformer.training.policies.standard import Progress
from tf_transformer.training.step.train_step import TrainStep

# A dataset of batches, or a function of the epoch returning that epoch's batches (the
# deterministic way to reshuffle: a resumed run rebuilds epoch k's order exactly; see
# `tf_transformer.training.start.entry.epoch_batches`).
Batches = tf.data.Dataset | Callable[[int], tf.data.Dataset]


def as_int64(inputs, tgt_out):
    src, tgt_in = inputs
    return (tf.cast(src, tf.int64), tf.cast(tgt_in, tf.int64)), tf.cast(tgt_out, tf.int64)


class EpochLoop:
    """Trains epoch after epoch, step after step, until a callback stops it.

    It does what `model.fit` does for its callbacks, with `TrainStep`'s updates: before each
    update `on_train_batch_begin`, after it (and after advancing `progress`)
    `on_train_batch_end` with the update's logs `{"loss", "accuracy", "tokens", "loss_sum",
    "correct"}` (sums and means over the global batch); at an epoch end, the validation loss
    and accuracy of `val_ds` in the logs of `on_epoch_end`. Every policy (stopping,
    checkpoints, validation, ...) is such a callback (see `training.policies`); they end the
    run by setting `model.stop_training`.

    A run resumes where `progress` says: the epoch in progress, whose first `position` batches
    are skipped.

    Args:
      steps: the compiled steps of the model and optimizer.
      progress: the run's progress, which the loop advances.
      callbacks: called in this order.
    """

    def __init__(
        self,
        *,
        steps: TrainStep,
        progress: Progress,
        callbacks: Sequence[tf.keras.callbacks.Callback],
    ):
        self.steps = steps
        self.progress = progress
        self.model = steps.model
        self.callbacks = tf.keras.callbacks.CallbackList(list(callbacks), model=self.model)

    def run(self, train_ds: Batches, val_ds: tf.data.Dataset | None = None) -> list[dict]:
        """Trains until a callback stops the run; returns one record per epoch finished."""
        history = []
        self.model.stop_training = False
        self.callbacks.on_train_begin()
        while not self.model.stop_training:
            epoch = self.progress.epoch
            self.callbacks.on_epoch_begin(epoch)
            self._run_epoch(train_ds, epoch)
            if not self.model.stop_training:
                history.append(self._end_epoch(epoch, val_ds))
        self.callbacks.on_train_end()
        return history

    def _run_epoch(self, train_ds: Batches, epoch: int) -> None:
        """Trains the rest of epoch `epoch`, or until a callback stops the run."""
        state, group_size = self.progress.state, self.steps.group_size
        dataset = train_ds(epoch) if callable(train_ds) else train_ds
        # `position` counts the batches of the epoch's sequence already trained on.
        dataset = dataset.map(as_int64).skip(self.progress.position)
        for micro_batches in self.steps.updates(dataset):
            batch = self.progress.position // group_size
            self.callbacks.on_train_batch_begin(batch)
            sums = {key: float(value) for key, value in self.steps.update(micro_batches).items()}
            state.step.assign_add(1)
            state.position.assign_add(group_size)
            self.callbacks.on_train_batch_end(batch, {**sums, **Totals.of(sums)})
            if self.model.stop_training:
                return

    def _end_epoch(self, epoch: int, val_ds: tf.data.Dataset | None) -> dict:
        state = self.progress.state
        self.progress.batches_per_epoch = self.progress.position
        state.epoch.assign_add(1)
        state.position.assign(0)
        logs = {}
        if val_ds is not None:
            metrics = self.steps.evaluate(val_ds.map(as_int64))
            logs = {f"val_{name}": value for name, value in metrics.items()}
        self.callbacks.on_epoch_end(epoch, logs)
        return {"epoch": self.progress.epoch, "step": self.progress.step, **logs}
