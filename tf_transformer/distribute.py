"""Choosing a `tf.distribute` strategy and a mixed-precision policy from the configuration."""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tf_transformer.config import ModelConfig

_POLICIES = {None: "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


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


def policy_name(mixed_precision: str | None) -> str:
    """The Keras dtype policy for `TrainConfig.mixed_precision` (None, "float16", "bfloat16")."""
    try:
        return _POLICIES[mixed_precision]
    except KeyError:
        raise ValueError(
            f"mixed_precision must be None, 'float16' or 'bfloat16', got {mixed_precision!r}."
        ) from None


def build_model(model_config: ModelConfig, mixed_precision: str | None = None):
    """A built `Transformer` with the dtype policy of `mixed_precision` (variables float32).

    Call it inside `strategy.scope()` so the variables are mirrored. The global policy is set
    while the model is built (and restored after): sublayers created without an explicit
    `dtype` (the Dropout layers) would otherwise compute in float32 and break float16 adds.
    """
    from tf_transformer.model import Transformer

    policy = policy_name(mixed_precision)
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        model = Transformer(**model_config.to_dict(), dtype=policy)
        model.build()
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)
    return model
