"""`fit`'s epoch files, Keras' `BackupAndRestore` backup and `ModelCheckpoint`'s model.keras:
written whole or not at all, and a torn backup passed over.

Keras writes both in place; here each is written under a temporary name and renamed
(`atomic_files`), so a full disk is one `WriteError` line and leaves the previous files whole.

Keras writes `latest.weights.h5` and `training_metadata.json` at each epoch's end and deletes
them when `fit` ends, so a backup is left only by a run that was killed. A backup torn all the
same (a copy cut short, one written in place by an older version) fails in h5py
(`OSError: ... truncated file`). The backup is not a TensorFlow checkpoint, so the check is the
load itself (as `checkpoint_files.torn_note` does with `load`).

What it guarantees: the model starts `fit` either with the whole backup (weights, optimizer
and epoch) or with the run's newest whole checkpoint of `checkpoints/`, which `fit` restored
before (weights, optimizer and step), at the start of that checkpoint's epoch; never with a
mix of the two. Checkpoints are saved at every epoch's end too, so the fallback loses no epoch.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from tf_transformer.atomic_files import write_directory, write_file
from tf_transformer.checkpoint_files import (
    CheckpointReadError,
    TornCheckpointError,
    first_line,
    report_fallback,
)

# What h5py says of a weights file cut short or damaged (json says it with JSONDecodeError).
TORN_H5_MESSAGES = ("truncated file", "file signature not found", "bad object header")


def is_torn_backup_error(error: BaseException) -> bool:
    """Whether a load error of the backup means a torn file (h5py: truncated, no signature;
    json: a document cut short), not another cause (permission denied, a missing entry)."""
    if isinstance(error, json.JSONDecodeError):
        return True
    return isinstance(error, OSError) and any(m in str(error) for m in TORN_H5_MESSAGES)


class BackupAndRestore(tf.keras.callbacks.BackupAndRestore):
    """Keras' `BackupAndRestore` that, when its backup does not load, warns in one line, removes
    the backup and goes back to the checkpoint `fit` restored.

    Args:
      backup_dir: the backup's folder.
      restore: restores again the checkpoint `fit` restored (a failed load may have set part
        of the weights) and returns its prefix; None when the run has no checkpoint.
    """

    def __init__(self, backup_dir: str, restore: Callable[[], str | None]):
        super().__init__(backup_dir)
        self.restore = restore

    def _save_model(self):
        """Writes the backup's folder whole (weights and epoch together) or not at all."""

        def save(folder: str) -> None:
            weights = os.path.join(folder, os.path.basename(self._weights_path))
            self.model.save_weights(weights, overwrite=True)
            metadata = {"epoch": self._current_epoch, "batch": self._last_batch_seen}
            Path(folder, os.path.basename(self._training_metadata_path)).write_text(
                json.dumps(metadata)
            )

        write_directory(self.backup_dir, save, replace=True)

    def on_train_begin(self, logs=None):
        try:
            super().on_train_begin(logs)
        except (OSError, ValueError) as error:
            if isinstance(error, OSError) and not is_torn_backup_error(error):
                raise CheckpointReadError(  # permission denied: stop, pass nothing over
                    f"cannot read the backup {self.backup_dir}: {first_line(error)}; nothing "
                    "was passed over or removed. Fix its files' access, then run again."
                ) from error
            if not is_torn_backup_error(error):  # a bug
                raise
            note = f"the backup {self.backup_dir} is torn ({first_line(error)})"
            self.model._initial_epoch = None  # the checkpoint's epoch, which `fit` was given
            prefix = self.restore()
            if prefix is None:
                raise TornCheckpointError(
                    f"nothing whole to resume from: {note} and the run holds no checkpoint. "
                    "Start over with --overwrite."
                ) from error
            shutil.rmtree(self.backup_dir, ignore_errors=True)
            report_fallback([note], f"resuming from {prefix}, the newest whole checkpoint")


class ModelCheckpoint(tf.keras.callbacks.ModelCheckpoint):
    """Keras' `ModelCheckpoint` writing its file whole or not at all (`atomic_files.write_file`;
    when Keras decides not to save, e.g. no better `val_loss`, the file stays as it was)."""

    def _save_model(self, epoch, batch, logs):
        final = self.filepath

        def save(tmp: str) -> None:
            self.filepath = tmp
            try:
                super(ModelCheckpoint, self)._save_model(epoch, batch, logs)
            finally:
                self.filepath = final

        write_file(final, save)
