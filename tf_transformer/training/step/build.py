"""`build_model`: a run's `Transformer`, built under its mixed-precision policy."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.config import ModelConfig
from tf_transformer.training.step.mixed_precision import policy_name


def build_model(model_config: ModelConfig, mixed_precision: str | None = None):
    """A built `Transformer` with the dtype policy of `mixed_precision` (variables float32;
    "auto" is resolved for this machine by `resolve_mixed_precision`, as a run resolves it).

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
