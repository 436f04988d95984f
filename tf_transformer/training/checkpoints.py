"""Training checkpoints: the tracked state, stop-on-signal, and averaging the last N."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from typing_extensions import Self  # typing.Self needs Python 3.11

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


def make_checkpoint_manager(
    directory: str | Path,
    *,
    model: tf.keras.Model,
    optimizer: tf.keras.optimizers.Optimizer,
    state: TrainState,
    max_to_keep: int = 5,
) -> tf.train.CheckpointManager:
    """A `CheckpointManager` over model, optimizer and `state` in `directory`.

    TensorFlow writes a checkpoint's data and index files first and then replaces the
    `checkpoint` state file atomically, so a process killed mid-save leaves the previous
    checkpoint as the latest one (tested with SIGKILL in tests/test_train.py).
    """
    checkpoint = model_checkpoint(model, optimizer=optimizer, state=state)
    return tf.train.CheckpointManager(
        checkpoint, str(directory), max_to_keep=max_to_keep, step_counter=state.step
    )


class StopSignal:
    """A context manager that turns SIGINT/SIGTERM into a flag the training loop polls.

    The loop finishes its step, saves a checkpoint and returns. A second signal of the same
    kind gets the previous handler (Ctrl-C twice still interrupts). Outside the main thread
    (where handlers cannot be installed) it does nothing.

    Example:
      >>> with StopSignal() as stop:
      ...     while not stop.requested: ...
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.requested:
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
            return
        self.requested = signal.Signals(signum).name

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


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
    if not checkpoint_paths:
        raise ValueError("No checkpoints to average.")
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
    manager = tf.train.CheckpointManager(checkpoint, str(output_dir), max_to_keep=1)
    return manager.save()
