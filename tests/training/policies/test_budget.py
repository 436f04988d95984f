"""Tests for the wall-clock budget of the training loop (`TrainConfig.max_minutes`)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.config import TrainConfig
from tf_transformer.training.loop import train

pytestmark = pytest.mark.cost(30)  # seconds in make test (measured)


def test_max_minutes_stops_after_the_first_step_and_averages(tmp_path):
    config = TRAIN.replace(max_minutes=1e-6, average_last=2, checkpoint_every=1)

    result = train(tmp_path, MODEL, config, copy_task, progress=False)

    assert result.stopped_by == "max_minutes"
    assert result.step == 1
    assert result.epoch == 0
    assert result.checkpoint.endswith("ckpt-1")
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")) == result.checkpoint
    # The budget stops the run as max_steps does: the averaged checkpoint is still written.
    assert result.averaged_checkpoint is not None


def test_max_minutes_resume_gets_a_fresh_budget(tmp_path):
    config = TRAIN.replace(max_minutes=1e-6)
    train(tmp_path, MODEL, config, copy_task, progress=False)

    result = train(tmp_path, MODEL, config, copy_task, progress=False)

    assert result.stopped_by == "max_minutes"
    assert result.step == 2


@pytest.mark.parametrize("minutes", [0.0, -1.0])
def test_max_minutes_must_be_positive(minutes):
    with pytest.raises(ValueError, match="max_minutes"):
        TrainConfig(max_minutes=minutes)


def test_cli_max_minutes_flag_reaches_the_train_config():
    import argparse

    from tf_transformer.commands.train import configs_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["train", "--preset", "tiny", "--max-minutes", "2.5"])

    _, train_config = configs_from_args(args)

    assert train_config.max_minutes == 2.5
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--max-minutes", "0"])
