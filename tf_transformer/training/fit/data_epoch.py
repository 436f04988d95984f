"""The training data's epoch under `model.fit`: one dataset whose every pass reads the epoch.

Keras takes a new pass over the training dataset each epoch, after the epoch's callbacks have
begun (a pass it made ready at the previous epoch's end reads nothing until its first batch is
asked for). `EpochStart` sets an epoch variable then, and a dataset made by
`EpochBatches.each_pass` reads it when its pass starts: each epoch draws its own mix, the one the
custom loop draws for that epoch.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def fit_dataset(train_ds, epoch: tf.Variable) -> tf.data.Dataset:
    """The dataset `model.fit` iterates: `train_ds.each_pass(epoch)` for an `EpochBatches`,
    epoch 0's batches for another function of the epoch, else `train_ds` itself."""
    if hasattr(train_ds, "each_pass"):
        return train_ds.each_pass(epoch)
    return train_ds(0) if callable(train_ds) else train_ds


class EpochStart(tf.keras.callbacks.Callback):
    """Sets the data's epoch variable at each epoch's start, then calls `on_epoch_begin`."""

    def __init__(self, epoch: tf.Variable, on_epoch_begin: Callable[[int], None] | None = None):
        super().__init__()
        self.epoch, self.call_at_start = epoch, on_epoch_begin

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch.assign(epoch)
        if self.call_at_start is not None:
            self.call_at_start(epoch)
