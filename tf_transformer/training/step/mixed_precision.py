"""Mixed precision: the Keras dtype policy of a run, and a model built under it."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.config import ModelConfig

_POLICIES = {None: "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


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
