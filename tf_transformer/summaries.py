"""TensorBoard scalars without the `tensorboard` package (`tf.summary.scalar` needs it)."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

# What `tensorboard.summary.v2.scalar` attaches: the "scalars" plugin, empty plugin content.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalar(name: str, value: float, step: int) -> None:
    """Writes one scalar to the default `tf.summary` writer, as TensorBoard's scalar plugin does.

    The same event `tensorboard.summary.v2.scalar` writes (a float32 scalar tagged for the
    "scalars" plugin), through core `tf.summary.write`, so TensorBoard need not be installed.
    """
    tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_METADATA)


class ScalarLogger(tf.keras.callbacks.Callback):
    """Writes `model.fit`'s epoch logs (and the learning rate) as scalars, per epoch.

    A stand-in for `tf.keras.callbacks.TensorBoard`, which needs the `tensorboard` package:
    `train/` gets the training metrics and `validation/` the `val_` ones.

    Args:
      log_dir: the directory of the two writers.
    """

    def __init__(self, log_dir: str):
        super().__init__()
        self.log_dir = str(log_dir)
        self._writers: dict[str, tf.summary.SummaryWriter] = {}

    def _writer(self, name: str) -> tf.summary.SummaryWriter:
        if name not in self._writers:
            self._writers[name] = tf.summary.create_file_writer(f"{self.log_dir}/{name}")
        return self._writers[name]

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        learning_rate = self.model.optimizer.learning_rate
        logs.setdefault("learning_rate", float(learning_rate))
        for key, value in logs.items():
            split, name = ("validation", key[4:]) if key.startswith("val_") else ("train", key)
            with self._writer(split).as_default():
                write_scalar(f"epoch_{name}", float(value), step=epoch)
        for writer in self._writers.values():
            writer.flush()
