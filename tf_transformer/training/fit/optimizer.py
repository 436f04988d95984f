"""The optimizer of `model.fit`: the custom loop's Adam update, with Keras' accumulation.

Gradient accumulation (`accumulate_steps` N) uses the Keras optimizer's own
`gradient_accumulation_steps`: every fit step trains one batch per replica, and every N-th
applies the *mean* of the N batches' gradients. Each batch's loss is its own token mean, so
a batch weighs 1/N however many tokens it holds: the update is that of one batch holding the
N only when they hold equal numbers of tokens. With token-budget batches they roughly do
(a batch of long sentences holds fewer sentences), but a short last batch of a bucket counts
as much as a full one. The custom loop's accumulation is exact (a token-weighted sum, see
`TrainStep`); so is its split across replicas, where `fit` likewise averages the replicas'
token means. Keras' schedules would see micro-batches (`optimizer._iterations`), so here the
schedule is fed `iterations // N`: the learning rate and `optimizer.iterations` count updates.
"""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.config import TrainConfig
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import dense_gradients


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DenseAdam(tf.keras.optimizers.Adam):
    """Adam that applies embedding gradients as dense tensors (see `dense_gradients`): the
    same update as the custom loop's, not one Adam moment update per token occurrence."""

    def apply(self, grads, trainable_variables=None):
        return super().apply(dense_gradients(list(grads)), trainable_variables)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class UpdateSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(step // accumulate_steps)`: a schedule of updates, fed Keras' micro-batch count.

    Args:
      schedule: a `LearningRateSchedule` of optimizer updates (e.g. `WarmupSchedule`).
      accumulate_steps: micro-batches per update (the optimizer's
        `gradient_accumulation_steps`).
    """

    def __init__(self, schedule, accumulate_steps: int):
        super().__init__()
        self.schedule = schedule
        self.accumulate_steps = int(accumulate_steps)

    def __call__(self, step):
        return self.schedule(tf.math.floordiv(step, self.accumulate_steps))

    def get_config(self) -> dict:
        return {
            "schedule": tf.keras.utils.serialize_keras_object(self.schedule),
            "accumulate_steps": self.accumulate_steps,
        }

    @classmethod
    def from_config(cls, config):
        schedule = tf.keras.utils.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["accumulate_steps"])


def fit_optimizer(d_model: int, train_config: TrainConfig) -> tf.keras.optimizers.Optimizer:
    """`make_optimizer`'s Adam as a `DenseAdam`, with Keras gradient accumulation when
    `train_config.accumulate_steps` > 1 (its schedule then counts updates)."""
    optimizer = make_optimizer(d_model, train_config)
    scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    adam = optimizer.inner_optimizer if scaled else optimizer
    config = adam.get_config()
    steps = train_config.accumulate_steps
    if steps > 1:
        config["learning_rate"] = UpdateSchedule(adam._learning_rate, steps)
        config["gradient_accumulation_steps"] = steps
    adam = DenseAdam.from_config(config)
    return tf.keras.mixed_precision.LossScaleOptimizer(adam) if scaled else adam
