"""Training checkpoints: the tracked state, saving that never names a torn checkpoint,
resuming from the newest whole one, and averaging the last N."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from tf_transformer.atomic_files import WriteError, is_write_error, out_of_space, reason
from tf_transformer.checkpoint_files import (
    TornCheckpointError,
    checkpoint_candidates,
    checkpoint_number,
    checkpoint_problem,
    newest_intact,
    report_fallback,
    torn_note,
)
from tf_transformer.errors import InvalidValueError
from tf_transformer.weights import model_checkpoint


class TrainState(tf.Module):
    """Counters saved beside the model and optimizer.

    Attributes:
      step: optimizer steps taken (batches trained on), int64.
      epoch: the epoch in progress (0-based), int64.
      position: batches of `epoch` already trained on; a resumed run skips that many.
    """

    def __init__(self):
        super().__init__(name="train_state")
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.position = tf.Variable(0, dtype=tf.int64, trainable=False, name="position")


def sync_checkpoint_files(prefix: str) -> None:
    """Flushes a written checkpoint's files, and the folder that names them, to the disk (local
    files only: an object store such as gs:// has no fsync and commits each object whole)."""
    if "://" in prefix:
        return
    for path in [
        prefix + ".index",
        *map(str, Path(prefix).parent.glob(Path(prefix).name + ".data-*")),
    ]:
        _fsync(path, os.O_RDONLY)
    _fsync(os.path.dirname(prefix) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def remove_checkpoint_files(prefix: str) -> None:
    """Removes the files of the checkpoint at `prefix` (its index and data)."""
    for path in Path(prefix).parent.glob(Path(prefix).name + ".*"):
        path.unlink(missing_ok=True)


def _fsync(path: str, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointManager(tf.train.CheckpointManager):
    """A `tf.train.CheckpointManager` whose state file names only checkpoints that are whole on
    disk, and whose failed save says so in one line and leaves the previous one the latest.

    What guarantees what (TF 2.21: checkpoint_management.py, checkpoint.py,
    functional_saver.py, tensor_bundle.cc):

    - TensorFlow writes the tensors under `PREFIX_temp/` (each file under a temporary name,
      renamed when closed); `MergeV2Checkpoints` then renames the data to `PREFIX.data-*` and
      writes `PREFIX.index`. Only once that op has returned does the manager's write callback
      replace the `checkpoint` state file (written aside, then renamed). So a save that fails
      or is killed never makes the state file name its checkpoint: the previous one stays the
      latest (tests/training/test_loop.py kills one with SIGKILL; tests/test_faults.py fills the disk).
    - TensorFlow fsyncs none of it: after a machine crash or power loss the renamed state file
      can reach the disk before the data it names. `sync_checkpoint_files` runs as a write
      callback before the manager's, so the files are on disk before the state names them.
    - A number the state names is never saved again (TensorFlow would rewrite its index in
      place under a reader): `save` returns its prefix. The numbers are steps, so that is the
      epoch-end save after the step's own, or a run resumed at an epoch's end. Only a torn one
      (a run resumed past it) is written anew, its files removed first.
    - A failed save removes what it left (`PREFIX_temp/`, a new `PREFIX`'s files) and raises
      `WriteError`.
    - With `keep_unproven`, the newest checkpoint is "unproven" until `prove` (a training step's
      loss on its weights was finite), and one more than `max_to_keep` is kept until then, so
      `discard_unproven` (its weights gave a NaN loss) leaves the one before it the latest.
    """

    def __init__(self, checkpoint, directory, max_to_keep, *, keep_unproven=False, **kwargs):
        super().__init__(checkpoint, directory, max_to_keep, **kwargs)
        self.prefix = os.path.join(directory, kwargs.get("checkpoint_name", "ckpt"))
        self.keep_unproven = keep_unproven
        # The newest checkpoint whose weights have not yet given a finite loss (one restored
        # by a resumed run has not either).
        self.unproven = self.latest_checkpoint if keep_unproven else None

    def _sweep(self):
        extra = 1 if self._max_to_keep and self.unproven else 0
        self._max_to_keep += extra
        try:
            super()._sweep()
        finally:
            self._max_to_keep -= extra

    def prove(self) -> None:
        """The newest checkpoint's weights gave a finite loss: the one kept before it may go."""
        if self.unproven:
            self.unproven = None
            self._sweep()
            self._record_state()

    def discard_unproven(self) -> str | None:
        """Removes the newest checkpoint when it is unproven (its weights gave a non-finite
        loss), so that the state file names the one before it; returns the removed prefix."""
        bad, self.unproven = self.unproven, None
        if bad is None or bad not in self._maybe_delete:
            return None
        del self._maybe_delete[bad]
        remaining = list(self._maybe_delete)
        self._latest_checkpoint = remaining[-1] if remaining else None
        if remaining:
            self._record_state()
        else:
            Path(self.directory, "checkpoint").unlink(missing_ok=True)
        remove_checkpoint_files(bad)
        return bad

    def save(self, checkpoint_number=None, check_interval=True, options=None):
        options = copy.copy(options) if options else tf.train.CheckpointOptions()
        callbacks = options.experimental_write_callbacks or []
        # A new list each time: the manager appends its own state-file callback after these.
        options.experimental_write_callbacks = [*callbacks, sync_checkpoint_files]
        if checkpoint_number is None:
            number = int(self.checkpoint.save_counter.numpy()) + 1
        else:
            number = int(np.asarray(checkpoint_number))
        prefix = f"{self.prefix}-{number}"
        if prefix in self.checkpoints:  # saved already: its index is never rewritten in place
            if checkpoint_problem(prefix) is None:
                return prefix
            remove_checkpoint_files(prefix)  # torn (resumed past it): written anew
        previous, unproven = self.latest_checkpoint, self.unproven
        if self.keep_unproven:
            self.unproven = prefix
        try:
            return super().save(checkpoint_number, check_interval, options)
        except Exception as error:  # narrowed to write errors below; anything else is a bug
            if not is_write_error(error):
                raise
            self.unproven = unproven
            shutil.rmtree(prefix + "_temp", ignore_errors=True)
            if prefix not in self.checkpoints:  # files of a checkpoint no state file names
                remove_checkpoint_files(prefix)
            kept = f"the latest is still {previous}" if previous else "none was written"
            then = (
                "Free some disk space, then continue with --resume."
                if out_of_space(error)
                else "Continue with --resume once it can be written."
            )
            raise WriteError(
                f"cannot write the checkpoint {prefix}: {reason(error)}; {kept}. {then}"
            ) from error


def save_model_checkpoint(model: tf.keras.Model, folder: str | Path, number: int) -> str:
    """Writes `model_checkpoint(model)` as the newest checkpoint of `folder` (best/, averaged/),
    numbered `number`, or one past the newest there when that is not lower (other weights of
    the same step: the averaged ones after the training ones). The one before stays until the
    next save, so a reader (`translate` beside `train`) that found it just before this save can
    still read it."""
    manager = CheckpointManager(model_checkpoint(model), str(folder), max_to_keep=2)
    newest = max(map(checkpoint_number, checkpoint_candidates(folder)), default=0)
    return manager.save(checkpoint_number=max(number, newest + 1))


def restore_newest(checkpoint: tf.train.Checkpoint, folder: str | Path) -> str | None:
    """Restores the newest whole checkpoint of `folder` into `checkpoint` and returns its
    prefix (None: the folder holds none); every object of `checkpoint` must be in it.

    Torn ones are passed over, newest first, with a one-line `TransformerWarning`.

    Raises:
      TornCheckpointError: the folder holds checkpoints, and none is whole.
    """
    notes: list[str] = []
    prefix = newest_intact(
        folder, notes, load=lambda path: checkpoint.restore(path).assert_existing_objects_matched()
    )
    if prefix is None and notes:
        raise TornCheckpointError(
            f"no whole checkpoint in {folder}: {'; '.join(notes)}. Start over with --overwrite."
        )
    report_fallback(notes, f"resuming from {prefix}, the newest whole one")
    return prefix


def make_checkpoint_manager(
    directory: str | Path,
    *,
    model: tf.keras.Model,
    optimizer: tf.keras.optimizers.Optimizer,
    state: TrainState,
    max_to_keep: int = 5,
) -> tf.train.CheckpointManager:
    """A `CheckpointManager` over model, optimizer and `state` in `directory`.

    A save that fails or is killed leaves the previous checkpoint the latest one; the newest is
    kept beside `max_to_keep` older ones until a step proves it (see `CheckpointManager`).
    """
    checkpoint = model_checkpoint(model, optimizer=optimizer, state=state)
    return CheckpointManager(
        checkpoint,
        str(directory),
        max_to_keep=max_to_keep,
        step_counter=state.step,
        keep_unproven=True,
    )


def average_checkpoints(
    checkpoint_paths: Sequence[str],
    model_fn: Callable[[], tf.keras.Model],
    output_dir: str | Path,
) -> str:
    """Averages the model weights of several checkpoints (as OpenNMT-tf and T2T do).

    Only the model is averaged and written (no optimizer), as a
    `model_checkpoint(model)` with its own `checkpoint` state file, which
    `RunDir.load_model("averaged")` restores like any other.

    Args:
      checkpoint_paths: checkpoint prefixes, e.g. `CheckpointManager.checkpoints[-N:]`.
      model_fn: returns a fresh built model of the run's configuration.
      output_dir: where to write, e.g. `RunDir.averaged_path` (replaces what is there).

    Returns:
      The path of the written checkpoint.
    """
    torn = {path: torn_note(path) for path in checkpoint_paths}
    checkpoint_paths = [path for path, note in torn.items() if note is None]
    if not checkpoint_paths:
        raise InvalidValueError("No checkpoints to average.")
    report_fallback([n for n in torn.values() if n], f"averaging the other {len(checkpoint_paths)}")
    model = model_fn()
    checkpoint = model_checkpoint(model)
    totals = None
    for path in checkpoint_paths:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
        values = [np.asarray(v.numpy(), dtype=np.float64) for v in model.weights]
        totals = values if totals is None else [t + v for t, v in zip(totals, values)]
    for variable, total in zip(model.weights, totals):
        dtype = variable.numpy().dtype
        variable.assign((total / len(checkpoint_paths)).astype(dtype))
    # A new number each time: the previous average stays until this one is whole.
    return save_model_checkpoint(model, output_dir, 1)
