"""TensorBoard scalars through TensorBoard's own `tf.summary` API (the `tensorboard` package).

The training loop opens one `tf.summary.create_file_writer` per folder (`logs/train`,
`logs/validation`) and writes inside `with writer.as_default():`; `model.fit` runs use
`tf.keras.callbacks.TensorBoard` (see `tf_transformer.training.fit.model_fit`). View both with
`tensorboard --logdir runs/`.
"""

from __future__ import annotations

import tensorflow as tf


def write_scalar(name: str, value: float, step: int) -> None:
    """Writes one scalar to the default `tf.summary` writer with `tf.summary.scalar`."""
    tf.summary.scalar(name, value, step=step)


def file_writer(log_dir, *, chief: bool = True):
    """A `tf.summary` file writer for `log_dir`; a no-op writer on a worker other than the chief
    (only the chief writes the run directory)."""
    if not chief:
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(str(log_dir))
