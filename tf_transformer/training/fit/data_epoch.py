"""The training data's epoch under `model.fit`: one dataset whose every pass is the next epoch.

Keras takes a new pass over the training dataset each epoch (a multi-replica `fit` repeats it:
`training.fit.model_fit`). A dataset made by `EpochBatches.each_pass(epoch)` reads the epoch
variable when a pass starts and adds one to it, so pass k draws the mix of epoch `first + k`,
whenever Keras starts it (a pass it makes ready at an epoch's end reads nothing until its first
batch is asked for). `EpochStart` reports each epoch's start (e.g. to log its mix).
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
    """Calls `on_epoch_begin(epoch)` at each epoch's start."""

    def __init__(self, on_epoch_begin: Callable[[int], None] | None = None):
        super().__init__()
        self.call_at_start = on_epoch_begin

    def on_epoch_begin(self, epoch, logs=None):
        if self.call_at_start is not None:
            self.call_at_start(epoch)
