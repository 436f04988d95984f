"""Tests for tf.distribute (two logical CPUs, in a subprocess) and mixed precision."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.test_train import MODEL, TRAIN, copy_task
from tf_transformer.training.distribute import get_strategy
from tf_transformer.training.mixed_precision import build_model, policy_name
from tf_transformer.training.schedule import make_optimizer
from tf_transformer.training.train_step import TrainStep

REPO_ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process: logical devices must be set before TensorFlow initialises them.
SCRIPT = """
import json, sys, tempfile
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.test_train import MODEL, TRAIN, copy_task
from tf_transformer.training.distribute import get_strategy
from tf_transformer.training.fit import fit
from tf_transformer.training.loop import train

config = TRAIN.replace(max_steps=4, epochs=1)
out = {}
for name in ("default", "mirrored"):
    strategy = get_strategy(name)
    losses = []
    result = train(tempfile.mkdtemp(), MODEL, config, copy_task, strategy=strategy,
                   progress=False, on_step=lambda step, m: losses.append(m["loss"]))
    data = copy_task(0).take(4)
    _, history = fit(tempfile.mkdtemp(), MODEL, config.replace(max_steps=None), data,
                     strategy=strategy, verbose=0)
    out[name] = {"replicas": strategy.num_replicas_in_sync, "loop": losses,
                 "weights": float(sum(tf.reduce_sum(w * w) for w in result.model.weights)),
                 "fit": history.history["loss"]}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mirrored_strategy_on_two_cpus_matches_one_device():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        check=False,
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    out = json.loads(process.stdout.strip().splitlines()[-1])
    assert out["default"]["replicas"] == 1 and out["mirrored"]["replicas"] == 2
    # The loop divides by the global token count: the same loss and weights up to float error.
    np.testing.assert_allclose(out["mirrored"]["loop"], out["default"]["loop"], rtol=1e-4)
    np.testing.assert_allclose(out["mirrored"]["weights"], out["default"]["weights"], rtol=1e-4)
    # Keras averages per replica then sums: close, not equal, when replicas hold unequal tokens.
    np.testing.assert_allclose(out["mirrored"]["fit"], out["default"]["fit"], rtol=2e-2)


def test_multiworker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        get_strategy("multiworker")
    with pytest.raises(ValueError, match="Unknown strategy"):
        get_strategy("tpu")


def test_policies():
    assert policy_name(None) == "float32"
    assert policy_name("float16") == "mixed_float16"
    assert policy_name("bfloat16") == "mixed_bfloat16"


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_mixed_precision_train_step_gives_a_finite_loss(precision):
    config = TRAIN.replace(mixed_precision=precision)
    model = build_model(MODEL, precision)
    assert model.compute_dtype == precision and model.weights[0].dtype == "float32"
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # restored
    optimizer = make_optimizer(MODEL.d_model, config)
    optimizer.build(model.trainable_variables)
    steps = TrainStep(model, optimizer)
    before = model.weights[1].numpy().copy()
    sums = steps.train_step(next(iter(copy_task(0))))
    assert np.isfinite(float(sums["loss_sum"])) and float(sums["tokens"]) > 0
    after = model.weights[1].numpy()
    assert np.isfinite(after).all()
    # float16 may skip a step while the loss scale settles; bfloat16 always updates.
    if precision == "bfloat16":
        assert not np.array_equal(before, after)
