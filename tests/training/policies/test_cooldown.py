"""The learning-rate cooldown: the fraction of the budget left, the schedule it scales, and the
training loop and `model.fit` callback that set it."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import tensorflow as tf

from tests.training.test_logs import read_scalars
from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.config import TrainConfig
from tf_transformer.training.fit.optimizer import fit_optimizer
from tf_transformer.training.loop import train
from tf_transformer.training.policies.budget import Budget
from tf_transformer.training.policies.progress import FitProgress, Progress
from tf_transformer.training.policies.standard import CoolDown, StopRules
from tf_transformer.training.policies.stop_signal import StopSignal
from tf_transformer.training.step.schedule import (
    Cooldown,
    WarmupSchedule,
    find_cooldown,
    make_optimizer,
)

pytestmark = pytest.mark.cost(30)  # seconds in make test (measured)


def test_budget_left_is_the_smallest_fraction_still_to_run():
    budget = Budget(max_steps=100, max_minutes=1.0, epochs=4, started=0.0)
    assert budget.left(80, now=0.0) == pytest.approx(0.2)  # steps
    assert budget.left(10, now=54.0) == pytest.approx(0.1)  # minutes
    epochs = {"epoch": 3, "position": 5, "batches_per_epoch": 10}
    assert budget.left(0, now=0.0, **epochs) == pytest.approx(0.125)  # 3.5 of 4 epochs
    # An epoch of unknown size does not count; past the end is 0.
    assert budget.left(0, now=0.0, epoch=3, position=5) == 1.0
    assert budget.left(150, now=0.0) == 0.0
    assert budget.left(0, now=600.0) == 0.0
    assert Budget(max_steps=10).bounded and not Budget().bounded
    assert Budget().left(10**6) == 1.0


def test_budget_stop_rules_end_at_the_limit_they_name():
    budget = Budget(max_steps=100, max_minutes=1.0, epochs=4, started=0.0)
    assert [budget.steps_done(step) for step in (99, 100, 101)] == [False, True, True]
    assert [budget.out_of_time(now) for now in (59.9, 60.0)] == [False, True]
    assert [budget.epochs_done(epoch) for epoch in (3, 4)] == [False, True]
    unbounded = Budget(started=0.0)
    assert not (unbounded.steps_done(10**9) or unbounded.out_of_time(1e9))
    assert not unbounded.epochs_done(10**9)


def test_cooldown_scales_the_schedule_over_the_last_fraction():
    base = WarmupSchedule(d_model=256, warmup_steps=300, scale=0.5)
    cooled = Cooldown(base, fraction=0.2)
    assert float(cooled(1000)) == float(base(1000))  # not set yet: the base rate
    for left, factor in [(1.0, 1.0), (0.5, 1.0), (0.2, 1.0), (0.1, 0.5), (0.05, 0.25), (0.0, 0.0)]:
        cooled.set_left(left)
        np.testing.assert_allclose(float(cooled(1000)), factor * float(base(1000)), rtol=1e-6)
    cooled.set_left(-3.0)
    assert float(cooled.left) == 0.0
    cooled.set_left(7.0)
    assert float(cooled.left) == 1.0
    with pytest.raises(ValueError, match="cooldown fraction"):
        Cooldown(base, fraction=0.0)


def test_cooldown_config_round_trip():
    cooled = Cooldown(WarmupSchedule(d_model=256, warmup_steps=300, scale=0.5), fraction=0.3)
    restored = tf.keras.optimizers.schedules.deserialize(
        tf.keras.optimizers.schedules.serialize(cooled)
    )
    assert isinstance(restored, Cooldown) and restored.fraction == 0.3
    assert restored.schedule.get_config() == cooled.schedule.get_config()


@pytest.mark.parametrize(
    "changes",
    [{}, {"mixed_precision": "float16"}, {"accumulate_steps": 2}],
    ids=["plain", "loss-scaled", "accumulating"],
)
def test_optimizers_carry_the_cooldown_only_when_asked(changes):
    config = TrainConfig(warmup_steps=10, **changes)
    assert find_cooldown(fit_optimizer(16, config)) is None
    found = find_cooldown(fit_optimizer(16, config.replace(cooldown=0.25)))
    assert isinstance(found, Cooldown) and found.fraction == 0.25
    assert isinstance(find_cooldown(make_optimizer(16, config.replace(cooldown=0.5))), Cooldown)


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_cooldown_must_be_a_fraction(value):
    with pytest.raises(ValueError, match="cooldown must be in"):
        TrainConfig(cooldown=value)


def test_loop_cools_down_to_the_last_step(tmp_path):
    """Before update k of 20 the loop says 1 - (k-1)/20 of the budget is left; the logged rate
    (the schedule at the step count after the update) is the base rate times that over 0.5."""
    config = TRAIN.replace(max_steps=20, cooldown=0.5, log_every=1, checkpoint_every=100)

    train(tmp_path, MODEL, config, copy_task, progress=False)

    logged = dict(read_scalars(tmp_path / "logs" / "train")["learning_rate"])
    base = WarmupSchedule(MODEL.d_model, config.warmup_steps, config.lr_scale)
    expected = {k: float(base(k)) * min(1.0, (1 - (k - 1) / 20) / 0.5) for k in range(1, 21)}
    assert sorted(logged) == list(range(1, 21))
    np.testing.assert_allclose([logged[k] for k in expected], list(expected.values()), rtol=1e-5)
    assert logged[10] == pytest.approx(float(base(10)))  # before the last half: no change
    assert logged[20] == pytest.approx(0.1 * float(base(20)), rel=1e-5)


def test_a_spent_time_budget_trains_at_rate_zero(tmp_path):
    config = TRAIN.replace(max_minutes=1e-6, cooldown=0.5, log_every=1)

    result = train(tmp_path, MODEL, config, copy_task, progress=False)

    assert result.step == 1
    assert read_scalars(tmp_path / "logs" / "train")["learning_rate"] == [(1, 0.0)]


def test_fit_callbacks_set_what_is_left_of_the_steps_and_stop_at_the_last():
    inputs = tf.keras.Input((3,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(inputs))
    config = TrainConfig(warmup_steps=10, cooldown=0.5)
    model.compile(optimizer=make_optimizer(16, config), loss="mse")
    status, budget = Progress(), Budget(max_steps=8)
    with StopSignal() as signal:
        callbacks = [
            FitProgress(progress=status),
            CoolDown(progress=status, budget=budget),
            StopRules(progress=status, budget=budget, signal=signal),
        ]
        model.fit(np.ones((16, 3)), np.zeros((16, 2)), batch_size=1, callbacks=callbacks, verbose=0)

    assert int(model.optimizer.iterations) == 8 and status.stopped_by == "max_steps"

    # Set before the 8th update, when 7 of 8 steps were done.
    assert float(find_cooldown(model.optimizer).left) == pytest.approx(1 / 8)


def test_cli_cooldown_flag_reaches_the_train_config():
    from tf_transformer.commands.train import configs_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["train", "--preset", "tiny", "--cooldown", "0.3"])

    assert configs_from_args(args)[1].cooldown == 0.3
