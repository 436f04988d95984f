"""Tests for tf.distribute (two logical CPUs, in a subprocess; two worker processes are in
test_multiworker.py), the split of batches among replicas, and mixed precision."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.data.test_corpus import PAIRS, pieces_of, write_shards
from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.config import DataConfig
from tf_transformer.data.mix import Mix
from tf_transformer.training.distribute import (
    describe_lost_worker,
    get_strategy,
    input_shard,
    is_chief,
    replica_batches,
)
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.mixed_precision import policy_name
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep

pytestmark = pytest.mark.cost(56)  # seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh process: logical devices must be set before TensorFlow initialises them.
SCRIPT = """
import gc, json, sys, tempfile
import tensorflow as tf
from tf_transformer.cli import TRACING_GC_THRESHOLD
gc.set_threshold(*TRACING_GC_THRESHOLD)  # as in the test processes (tests/conftest.py)
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.training.distribute import get_strategy
from tf_transformer.training.fit.model_fit import fit
from tf_transformer.training.loop import train

config = TRAIN.replace(max_steps=4, epochs=1)
out = {}
# Two replicas take two whole batches per step: one device with accumulate_steps=2 does too.
for name, accumulate in (("default", 2), ("mirrored", 1)):
    strategy = get_strategy(name)
    losses = []
    result = train(tempfile.mkdtemp(), MODEL, config.replace(accumulate_steps=accumulate),
                   copy_task, strategy=strategy, progress=False,
                   on_step=lambda step, m: losses.append([m["loss"], m["tokens"]]))
    data = copy_task(0).take(6)
    model = fit(tempfile.mkdtemp(), MODEL,
                         config.replace(max_steps=None, accumulate_steps=accumulate), data,
                         strategy=strategy, verbose=0).model
    history = model.history
    out[name] = {"replicas": strategy.num_replicas_in_sync, "loop": losses,
                 "weights": {w.path.split("/", 1)[1]: w.numpy().tolist()
                             for w in result.model.trainable_variables},
                 "fit": history.history["loss"], "fit_steps": int(model.optimizer.iterations.numpy()),
                 "fit_weights": [w.numpy().tolist() for w in model.trainable_variables]}
# Batches of every length share one trace of each step (the distributed dataset's spec).
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep
with strategy.scope():
    model = build_model(MODEL, None)
    optimizer = make_optimizer(MODEL.d_model, config)
    optimizer.build(model.trainable_variables)
steps = TrainStep(model, optimizer, strategy=strategy)
def cut(i, batch):  # batches of 3, 4 and 5 tokens
    (src, tgt_in), tgt_out = batch
    n = 3 + tf.cast(i % 3, tf.int32)
    return (src[:, :n], tgt_in[:, :n]), tgt_out[:, :n]
lengths = set()
for epoch in range(2):  # a new distributed dataset each epoch, as the loop makes
    varied = copy_task(epoch, num_examples=24, batch_size=2).enumerate().map(cut)
    for micro_batches in steps.updates(varied):
        steps.update(micro_batches)
    steps.evaluate(varied)
    lengths |= {int(batch[1].shape[1]) for batch in varied}
out["traces"] = [steps.train_traces, steps.eval_traces, len(lengths)]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mirrored_strategy_on_two_cpus_matches_one_device_accumulating_two_batches():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):  # two devices, in parallel
        env.pop(name, None)
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
    mirrored, default = out["mirrored"], out["default"]
    assert default["replicas"] == 1 and mirrored["replicas"] == 2
    train_traces, eval_traces, lengths = out["traces"]
    assert (train_traces, eval_traces) == (1, 1) and lengths > 1
    # The loop divides by the global token count: the same tokens, losses and weights up to
    # float error, but for the attention key biases: their gradient is zero but for float
    # noise (softmax ignores a constant added to every logit), which Adam turns into steps of
    # up to the learning rate.
    np.testing.assert_allclose(mirrored["loop"], default["loop"], rtol=1e-5)
    for name, weight in mirrored["weights"].items():
        atol = 2e-3 if name.endswith("key/bias") else 1e-5
        np.testing.assert_allclose(weight, default["weights"][name], atol=atol, err_msg=name)
    # fit: the mean of the two batches' token means either way (3 updates of 6 batches).
    assert mirrored["fit_steps"] == default["fit_steps"] == 3
    np.testing.assert_allclose(mirrored["fit"], default["fit"], rtol=1e-5)
    for a, b in zip(mirrored["fit_weights"], default["fit_weights"]):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_replica_batches_split_an_epoch_without_repeats(replicas):
    # 7 batches of different sizes, batch i filled with the id i + 1.
    spec = tf.TensorSpec((None, None), tf.int64)
    dataset = tf.data.Dataset.from_generator(
        lambda: (((b, b), b) for b in (np.full((1 + i % 3, 4), i + 1) for i in range(7))),
        output_signature=((spec, spec), spec),
    )
    seen = []
    for index in range(replicas):
        part = replica_batches(dataset, group_size=replicas, start=index, count=1)
        seen.append([int(b[1].numpy().max(initial=0)) for b in part])
    # Every replica takes the same number of steps; the last group is completed with empty
    # batches (no rows, no tokens: 0 here).
    assert [len(ids) for ids in seen] == [-(-7 // replicas)] * replicas
    assert sorted(i for ids in seen for i in ids if i) == list(range(1, 8))  # each batch once
    # Replica r takes batches r, r + R, r + 2R, ... (its slice of each group).
    for index, ids in enumerate(seen):
        assert [i for i in ids if i] == list(range(index + 1, 8, replicas))


def test_replica_batches_slices_groups_for_accumulation():
    dataset = tf.data.Dataset.range(10).map(lambda i: tf.fill((1, 1), i + 1))
    dataset = dataset.map(lambda x: ((x, x), x))
    # Two workers accumulating 2 batches each: groups of 4, worker 1 takes batches 3 and 4.
    part = replica_batches(dataset, group_size=4, start=2, count=2)
    assert [int(b[1].numpy().max(initial=0)) for b in part] == [3, 4, 7, 8, 0, 0]


def test_is_chief_follows_tf_config(monkeypatch):
    def task(kind, index, chief=False):
        cluster = {"worker": ["a:1", "b:2"], **({"chief": ["c:3"]} if chief else {})}
        config = {"cluster": cluster, "task": {"type": kind, "index": index}}
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert is_chief()
    task("worker", 0)
    assert is_chief()
    task("worker", 1)
    assert not is_chief()
    task("worker", 0, chief=True)
    assert not is_chief()
    task("chief", 0, chief=True)
    assert is_chief()
    assert is_chief(tf.distribute.get_strategy())  # no cluster: the only process


def test_describe_lost_worker_names_the_task():
    heartbeats = (
        "Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
        "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
        "The tasks have crashed."
    )
    error = tf.errors.UnavailableError(None, None, f"Graph execution error:\n\n{heartbeats}")
    assert describe_lost_worker(error) == "/job:worker/replica:0/task:1 stopped sending heartbeats"
    refused = "Collective ops is aborted by: failed to connect to all addresses; Connection refused"
    error = tf.errors.UnavailableError(None, None, f"Graph execution error:\n{refused}")
    assert describe_lost_worker(error) == "failed to connect to all addresses; Connection refused"


def test_multiworker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        get_strategy("multiworker")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}}))
    with pytest.raises(ValueError, match="'task'"):
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


def _listed(pairs: tf.data.Dataset) -> list[tuple[str, str]]:
    return [(s.decode(), t.decode()) for s, t in pairs.as_numpy_iterator()]


def _worker_pairs(mix: Mix, seed: int, workers: int = 2) -> list[list[tuple[str, str]]]:
    """Each input pipeline's pairs of epoch `seed`, as `distribute_datasets_from_function`
    would give each worker its `InputContext`."""
    contexts = [
        tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=index)
        for index in range(workers)
    ]
    return [_listed(mix.pairs(seed, shard=input_shard(context))) for context in contexts]


@pytest.mark.parametrize("piece_lines", [15, 1000])  # 16 pieces; one piece (split by line)
def test_two_input_pipelines_read_every_pair_of_an_epoch_once(tmp_path, piece_lines):
    write_shards(tmp_path, PAIRS, layout="one file")
    mix = Mix(["one"], [pieces_of(tmp_path, piece_lines)], [1.0], shuffle_buffer=32)
    for seed in (0, 1):
        first, second = _worker_pairs(mix, seed)
        assert not set(first) & set(second)
        assert sorted(first + second) == sorted(PAIRS)  # every pair once
        assert abs(len(first) - len(second)) <= (15 if piece_lines == 15 else 1)
    assert input_shard(None) == (0, 1)
    # The part is this worker's already: a strategy must not shard it again.
    policy = mix.pairs(0, shard=(1, 2)).options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.OFF
    assert _listed(mix.pairs(0, shard=(0, 1))) == _listed(mix.pairs(0))  # one worker: as before


def test_two_input_pipelines_draw_a_mix_s_shares_together(tmp_path):
    specs = []
    for tag, size in (("a", 120), ("b", 60)):
        (tmp_path / tag).mkdir()
        (tmp_path / tag / "train.tsv").write_text(
            "".join(f"{tag} {i} pt\t{tag} {i} en\n" for i in range(size))
        )
        specs.append(str(tmp_path / tag))
    mix = Mix.load(DataConfig(dataset=tuple(specs), dataset_weights=(0.5, 0.5)))
    parts = _worker_pairs(mix, 3)
    drawn = [source.split()[0] for part in parts for source, _ in part]
    assert {tag: drawn.count(tag) for tag in "ab"} == mix.shares(3)
    # Corpus b (60 pairs, ~90 draws) is read more than once; a (120, ~90) less than a pass:
    # its pairs are never drawn twice, by one worker or by both.
    a_pairs = [pair for part in parts for pair in part if pair[0].startswith("a ")]
    assert len(a_pairs) == len(set(a_pairs))


def test_shard_data_is_refused_under_fit_before_anything_is_written(tmp_path):
    from tf_transformer import training
    from tf_transformer.config import TrainConfig, get_preset
    from tf_transformer.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match="custom loop only: drop --fit, or --shard-data"):
        training.run(
            tmp_path / "run", DataConfig(), get_preset("tiny"), TrainConfig(shard_data=True),
            fit=True,
        )  # fmt: skip
    assert not (tmp_path / "run").exists()
