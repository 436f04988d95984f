"""Tests for the warm-up learning-rate schedule and the paper's optimizer."""

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import TrainConfig
from tf_transformer.training.step.schedule import CustomSchedule, WarmupSchedule, make_optimizer


@pytest.mark.parametrize(
    "step, expected",
    [
        (1, 1.746928107421711e-07),
        (1000, 1.746928107421711e-04),
        (4000, 6.987712429686843e-04),  # the peak: (d_model · warmup)^-0.5
        (10000, 4.419417382415922e-04),
    ],
)
def test_paper_values(step, expected):
    schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6)


def test_integer_steps_and_step_zero_are_finite():
    schedule = WarmupSchedule(d_model=128, warmup_steps=100, scale=2.0)
    values = schedule(tf.constant([0, 1, 50, 100, 400], tf.int64)).numpy()
    expected = [1.767766952966369e-04, 1.767766952966369e-04, 8.838834764831846e-03,
                1.767766952966369e-02, 8.838834764831846e-03]  # fmt: skip
    np.testing.assert_allclose(values, expected, rtol=1e-6)


def test_config_round_trip_and_tutorial_alias():
    schedule = WarmupSchedule(d_model=256, warmup_steps=300, scale=0.5)
    assert schedule.get_config() == {"d_model": 256, "warmup_steps": 300, "scale": 0.5}
    clone = WarmupSchedule.from_config(schedule.get_config())
    assert float(clone(77)) == float(schedule(77))
    restored = tf.keras.optimizers.schedules.deserialize(
        tf.keras.optimizers.schedules.serialize(schedule)
    )
    assert isinstance(restored, WarmupSchedule) and restored.get_config() == schedule.get_config()
    assert CustomSchedule is WarmupSchedule


def test_bad_sizes_raise():
    with pytest.raises(ValueError, match="positive"):
        WarmupSchedule(d_model=0)


def test_optimizer_with_schedule_survives_keras_save(tmp_path):
    inputs = tf.keras.Input((3,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(inputs))
    model.compile(optimizer=make_optimizer(16, TrainConfig(warmup_steps=10)), loss="mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = tf.keras.models.load_model(tmp_path / "m.keras")
    schedule = (
        loaded.optimizer.learning_rate_schedule
        if hasattr(loaded.optimizer, "learning_rate_schedule")
        else loaded.optimizer._learning_rate
    )
    assert isinstance(schedule, WarmupSchedule)
    assert schedule.get_config() == {"d_model": 16, "warmup_steps": 10, "scale": 1.0}
    assert int(loaded.optimizer.iterations.numpy()) == 1
    assert float(loaded.optimizer.learning_rate) == pytest.approx(float(schedule(1)))


def test_float16_wraps_in_loss_scale_optimizer():
    optimizer = make_optimizer(16, TrainConfig(mixed_precision="float16"))
    assert isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    assert not isinstance(
        make_optimizer(16, TrainConfig(mixed_precision="bfloat16")),
        tf.keras.mixed_precision.LossScaleOptimizer,
    )
