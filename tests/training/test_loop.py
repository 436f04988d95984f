"""Tests for the custom training loop: tracing, overfitting, resume, signals, NaN, averaging."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import TrainConfig, get_preset
from tf_transformer.run_dir import RunDir
from tf_transformer.training.loop import NonFiniteLossError, train
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep

pytestmark = pytest.mark.cost(60)  # seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[2]
VOCAB = 16
MODEL = get_preset("tiny").replace(input_vocab_size=VOCAB, target_vocab_size=VOCAB)
TRAIN = TrainConfig(
    epochs=100,
    warmup_steps=100,
    label_smoothing=0.0,
    checkpoint_every=10,
    log_every=10,
    keep_checkpoints=3,
)


def copy_task(
    epoch: int = 0,
    *,
    num_examples: int = 512,
    batch_size: int = 64,
    max_tokens: int = 6,
    reverse: bool = False,
) -> tf.data.Dataset:
    """Batches `((src, tgt_in), tgt_out)` of a copy (or reverse) task; the order follows `epoch`.

    The sentences are fixed (seed 0); `epoch` only seeds the order, as a real pipeline would.
    Ids: PAD 0, START 2, END 3, words 4..VOCAB-1. Each batch is padded to its longest row.
    """
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(num_examples):
        words = rng.integers(4, VOCAB, size=rng.integers(2, max_tokens + 1))
        target = words[::-1] if reverse else words
        rows.append((np.r_[words, 3], np.r_[2, target], np.r_[target, 3]))
    order = np.random.default_rng(1000 + epoch).permutation(num_examples)
    batches = []
    for start in range(0, num_examples, batch_size):
        chunk = [rows[i] for i in order[start : start + batch_size]]
        batches.append(tuple(_pad([row[k] for row in chunk]) for k in range(3)))
    src, tgt_in, tgt_out = (np.stack([b[k] for b in batches]) for k in range(3))
    return tf.data.Dataset.from_tensor_slices(((src, tgt_in), tgt_out))


def _pad(rows: list[np.ndarray], length: int = 8) -> np.ndarray:
    out = np.zeros((len(rows), length), np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _weights(model: tf.keras.Model) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights]


def _latest_step(run_dir: Path) -> int | None:
    latest = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    return None if latest is None else int(latest.rsplit("-", 1)[1])


def worker(run_dir: str, max_steps: int, sleep: float) -> None:
    """The training process the resume test starts (and kills); `sleep` slows each step."""

    def on_step(step, metrics):
        time.sleep(sleep)

    config = TRAIN.replace(max_steps=max_steps)
    result = train(run_dir, MODEL, config, copy_task, progress=False, on_step=on_step)
    print(json.dumps({"step": result.step, "stopped_by": result.stopped_by}), flush=True)


def _start_worker(
    run_dir: Path, max_steps: int, sleep: float, target: str = "tests.training.test_loop.worker"
) -> subprocess.Popen:
    """A process that runs `target(run_dir, max_steps, sleep)`."""
    module, name = target.rsplit(".", 1)
    code = f"from {module} import {name}; {name}({str(run_dir)!r}, {max_steps}, {sleep})"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, process: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"worker exited early: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("worker timed out")
        time.sleep(0.05)


def kill_then_resume(run_dir: Path, process: subprocess.Popen, resume) -> tuple[int, object]:
    """Kills `process` (training in `run_dir`) with SIGKILL after its first checkpoint, then
    calls `resume(on_step)`, whose run SIGTERM stops five steps later; checks that the resumed
    run started after the last checkpoint and stopped there with a checkpoint. Returns the
    step of the checkpoint it was killed after and the resumed `TrainResult`."""
    _wait_for(lambda: (_latest_step(run_dir) or 0) >= 10, process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = _latest_step(run_dir)
    assert killed_at is not None and killed_at % 10 == 0
    seen = []

    def on_step(step, metrics):
        seen.append(step)
        if step == killed_at + 5:
            os.kill(os.getpid(), signal.SIGTERM)

    resumed = resume(on_step)
    assert seen[0] == killed_at + 1
    assert resumed.stopped_by == "SIGTERM" and resumed.step == killed_at + 5
    assert _latest_step(run_dir) == killed_at + 5
    return killed_at, resumed


def test_train_step_does_not_retrace_over_lengths():
    model = build_model(MODEL)
    optimizer = make_optimizer(MODEL.d_model, TRAIN)
    optimizer.build(model.trainable_variables)
    steps = TrainStep(model, optimizer)
    for length in range(2, 22):  # 20 different lengths, two batch sizes
        ids = tf.fill((1 + length % 2, length), tf.constant(5, tf.int64))
        steps.train_step(((ids, ids), ids))
        steps.eval_step(((ids, ids), ids))
    assert steps.train_traces <= 2
    assert steps.eval_traces <= 2


@pytest.mark.slow
def test_tiny_model_learns_copy_task(tmp_path):
    config = TRAIN.replace(max_steps=160, checkpoint_every=1000)
    result = train(tmp_path / "run", MODEL, config, copy_task, progress=False)
    assert result.stopped_by == "max_steps" and result.step == 160
    steps = TrainStep(result.model, make_optimizer(MODEL.d_model, config))
    metrics = steps.evaluate(copy_task(0))
    assert metrics["accuracy"] > 0.95, metrics
    # The run directory can be read back: config.json and the final checkpoint.
    run = RunDir(tmp_path / "run")
    assert run.model_config() == MODEL and run.train_config() == config
    reloaded = run.load_model()
    for a, b in zip(_weights(result.model), _weights(reloaded)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_resume_after_sigkill_then_sigterm_matches_uninterrupted_run(tmp_path):
    # 1. A real process, killed with SIGKILL after its first checkpoint (every 10 steps).
    # 2. Resume: the counter continues after the last good checkpoint; SIGTERM five steps
    #    later saves a checkpoint and returns cleanly.
    run_dir = tmp_path / "interrupted"
    config = TRAIN.replace(max_steps=1000)
    killed_at, resumed = kill_then_resume(
        run_dir,
        _start_worker(run_dir, max_steps=1000, sleep=0.1),
        lambda on_step: train(run_dir, MODEL, config, copy_task, progress=False, on_step=on_step),
    )

    # 3. The same seed, never interrupted, stopped at the same step: identical weights.
    fresh_config = TRAIN.replace(max_steps=killed_at + 5)
    fresh = train(tmp_path / "fresh", MODEL, fresh_config, copy_task, progress=False)
    for a, b in zip(_weights(resumed.model), _weights(fresh.model)):
        np.testing.assert_array_equal(a, b)


def test_step_logs_without_a_loss_are_an_error_not_a_finite_loss():
    from tf_transformer.training.policies.progress import Progress
    from tf_transformer.training.policies.standard import Checkpoints, NonFiniteLoss

    progress = Progress()
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(), "unused", max_to_keep=1)
    policy = NonFiniteLoss(
        progress=progress, checkpoints=Checkpoints(progress=progress, manager=manager, every=1)
    )
    policy.on_train_batch_end(0, {"loss": 1.5})  # finite: nothing happens
    with pytest.raises(KeyError, match="hold no 'loss'"):
        policy.on_train_batch_end(0, {"accuracy": 0.5})
    with pytest.raises(NonFiniteLossError, match="the loss became inf at step 0"):
        policy.on_train_batch_end(0, {"loss": np.inf})


def test_average_last_checkpoints(tmp_path):
    config = TRAIN.replace(max_steps=6, checkpoint_every=2, average_last=2)
    result = train(tmp_path / "run", MODEL, config, copy_task, progress=False)
    run = RunDir(tmp_path / "run")
    assert result.averaged_checkpoint == run.latest_checkpoint("averaged")
    last_two = [_weights(run.load_model(f"{run.checkpoints_path}/ckpt-{s}")) for s in (4, 6)]
    averaged = _weights(run.load_model("averaged"))
    for a, b, mean in zip(*last_two, averaged):
        np.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6, atol=1e-7)
    assert not np.array_equal(last_two[0][0], last_two[1][0])
