"""Choosing a `tf.distribute` strategy from the configuration."""

from __future__ import annotations

import json
import os

import tensorflow as tf


def get_strategy(name: str = "default") -> tf.distribute.Strategy:
    """The strategy named by `TrainConfig.strategy`.

    Args:
      name: "default" (no distribution), "mirrored" (every local GPU, or every logical CPU
        device when there is no GPU) or "multiworker" (`MultiWorkerMirroredStrategy`, the
        cluster read from the `TF_CONFIG` environment variable).

    Raises:
      ValueError: an unknown name, or "multiworker" without a valid TF_CONFIG.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = None
        if not tf.config.list_logical_devices("GPU"):
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multiworker":
        tf_config = os.environ.get("TF_CONFIG")
        if not tf_config:
            raise ValueError("--strategy multiworker needs the TF_CONFIG environment variable.")
        try:
            json.loads(tf_config)["cluster"]
        except (ValueError, KeyError, TypeError):
            raise ValueError("TF_CONFIG is not JSON with a 'cluster' entry.") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"Unknown strategy {name!r}; choose default, mirrored or multiworker.")
