"""The paper's learning-rate schedule: linear warm-up, then inverse square-root decay."""

from __future__ import annotations

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class WarmupSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """`lr = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)` (paper §5.3).

    The rate rises linearly for `warmup_steps` steps, peaks at
    `scale · (d_model · warmup_steps)^-0.5` and then decays as `step^-0.5`. Steps arrive as
    integers (Keras passes `optimizer.iterations`, which starts at 0); they are cast to float32
    and clamped to at least 1, so step 0 gives the step-1 rate instead of 0 or a NaN.

    Args:
      d_model: model width.
      warmup_steps: steps of linear warm-up (paper: 4000).
      scale: a constant factor (1.0 in the paper), for tuning small models.

    Example:
      >>> schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
      >>> float(schedule(4000))  # the peak
      0.000698771...
      >>> optimizer = tf.keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0):
        super().__init__()
        if d_model < 1 or warmup_steps < 1:
            raise ValueError(
                f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}."
            )
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = tf.maximum(tf.cast(step, tf.float32), 1.0)
        decay = tf.math.rsqrt(step)
        warmup = step * float(self.warmup_steps) ** -1.5
        return self.scale * float(self.d_model) ** -0.5 * tf.minimum(decay, warmup)

    def get_config(self) -> dict:
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


# The TensorFlow tutorial's name for the same schedule.
CustomSchedule = WarmupSchedule


def make_optimizer(d_model: int, train_config) -> tf.keras.optimizers.Optimizer:
    """The paper's Adam (β1 0.9, β2 0.98, ε 1e-9) on the warm-up schedule.

    Wrapped in a `LossScaleOptimizer` when `train_config.mixed_precision` is "float16"
    (bfloat16 has float32's range and needs no loss scaling).

    Args:
      d_model: model width (the schedule's scale).
      train_config: a `tf_transformer.config.TrainConfig`.
    """
    schedule = WarmupSchedule(d_model, train_config.warmup_steps, scale=train_config.lr_scale)
    optimizer = tf.keras.optimizers.Adam(
        schedule,
        beta_1=train_config.beta_1,
        beta_2=train_config.beta_2,
        epsilon=train_config.epsilon,
    )
    if train_config.mixed_precision == "float16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer
