"""The paper's learning-rate schedule (linear warm-up, then inverse square-root decay), and a
cooldown that takes it to 0 over the end of a training budget."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.training.step.mixed_precision import policy_name


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
            raise InvalidValueError(
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


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Cooldown(tf.keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(step) · min(1, left / fraction)`: the rate falls linearly to 0 over the last
    `fraction` of a training budget.

    A run bounded by minutes does not know its last step in advance, so the schedule reads
    `left`, the fraction of the budget still to run (1.0 at the start, 0.0 at its end), from a
    float32 variable that the training loop sets before each step (`set_left`). Until the loop
    sets it, the rate is `schedule`'s.

    Args:
      schedule: the schedule to cool down (e.g. `WarmupSchedule`).
      fraction: the part of the budget, in (0, 1], over which the rate falls to 0.

    Example:
      >>> cooled = Cooldown(WarmupSchedule(d_model=256, warmup_steps=300), fraction=0.2)
      >>> cooled.set_left(0.1)  # the last 10% of the budget: half the rate
    """

    def __init__(self, schedule, fraction: float):
        super().__init__()
        if not 0.0 < fraction <= 1.0:
            raise InvalidValueError(f"the cooldown fraction must be in (0, 1], got {fraction}.")
        self.schedule = schedule
        self.fraction = float(fraction)
        # Not a checkpointed variable: the loop sets it from the budget at every step.
        self.left = tf.Variable(1.0, trainable=False, dtype=tf.float32, name="budget_left")

    def set_left(self, left: float) -> None:
        """Sets the fraction of the budget still to run (clipped to [0, 1])."""
        self.left.assign(min(max(float(left), 0.0), 1.0))

    def __call__(self, step):
        rate = self.schedule(step)
        return rate * tf.cast(tf.minimum(1.0, self.left / self.fraction), rate.dtype)

    def get_config(self) -> dict:
        return {
            "schedule": tf.keras.utils.serialize_keras_object(self.schedule),
            "fraction": self.fraction,
        }

    @classmethod
    def from_config(cls, config: dict):
        schedule = tf.keras.utils.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["fraction"])


def find_cooldown(optimizer) -> Cooldown | None:
    """The `Cooldown` schedule that drives `optimizer`, or None.

    Looks through a `LossScaleOptimizer` and through schedules that wrap another one in a
    `schedule` attribute (as `fit.UpdateSchedule` does).
    """
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    schedule = getattr(optimizer, "_learning_rate", None)
    while schedule is not None and not isinstance(schedule, Cooldown):
        schedule = getattr(schedule, "schedule", None)
    return schedule


def make_optimizer(d_model: int, train_config) -> tf.keras.optimizers.Optimizer:
    """The paper's Adam (β1 0.9, β2 0.98, ε 1e-9) on the warm-up schedule.

    With `train_config.cooldown` > 0 the schedule is wrapped in a `Cooldown` (the training
    loop sets how much of the budget is left).

    Wrapped in a `LossScaleOptimizer` when `train_config.mixed_precision` is "float16"
    (bfloat16 has float32's range and needs no loss scaling; "auto" never picks float16, and
    is resolved by the same function as the model's policy, `policy_name`).

    Args:
      d_model: model width (the schedule's scale).
      train_config: a `tf_transformer.config.TrainConfig`.
    """
    schedule = WarmupSchedule(d_model, train_config.warmup_steps, scale=train_config.lr_scale)
    if train_config.cooldown:
        schedule = Cooldown(schedule, train_config.cooldown)
    optimizer = tf.keras.optimizers.Adam(
        schedule,
        beta_1=train_config.beta_1,
        beta_2=train_config.beta_2,
        epsilon=train_config.epsilon,
    )
    if policy_name(train_config.mixed_precision) == "mixed_float16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer
