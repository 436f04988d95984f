"""`tf.distribute` for training: the strategy, which process writes, and who trains which batch.

How batches are split (the custom loop and `model.fit` alike): every replica trains whole
token-budget batches of its own. One update takes `replicas × accumulate_steps` consecutive
batches of the epoch's sequence (a *group*), and replica `r` of worker `w` gets its own slice of
each group (`replica_batches`), so the update is that of one batch holding the whole group: the
loop divides the summed token losses by the group's token count (`TrainStep`). The global batch
is thus `workers × local replicas × accumulate_steps × token_budget` tokens.

Why not `experimental_distribute_dataset` with auto-sharding: FILE sharding needs at least one
file per worker and gives workers different numbers of batches, and DATA sharding with
rebatching splits each bucketed batch (of a size that changes from batch to batch) into
per-replica pieces, some of them empty. Workers that run different numbers of steps hang in
their next collective. Here each worker builds the same batch sequence (the shuffle is seeded
with `seed + epoch`, the bucketing is deterministic) and keeps its slice of every group; the
last, incomplete group of an epoch is completed with empty batches (no tokens, so no loss and
no gradient), so every worker runs the same number of steps and no batch is dropped or seen
twice. Each worker reads and tokenizes the whole corpus for this, which costs little next to
training.

With `TrainConfig.shard_data` (the custom loop), each worker reads only its own part of the
epoch instead (`input_shard`, `Mix.pairs(..., shard=...)`: its pieces of a file corpus, or every
Nth pair) and cuts it into its own token-budget batches, a group's worth per update; so no pair
is read or trained twice across workers, and none is left out. The workers' batch counts then
differ by a few: `MultiWorkerMirroredStrategy`'s iterator asks every worker at each step
whether any has a batch left (an all-reduce of one number), and a worker that has run out
trains an empty batch until all have (tf.distribute's partial-batch handling). Such a run
differs from one process's: the batches are not the same.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context  # the coordination service's settings: no public API

from tf_transformer.data.corpus import Shard
from tf_transformer.errors import InvalidValueError


def strategy_for(train_config) -> tf.distribute.Strategy:
    """`get_strategy` with a `TrainConfig`'s `strategy` and `heartbeat_timeout`."""
    return get_strategy(train_config.strategy, heartbeat_timeout=train_config.heartbeat_timeout)


def get_strategy(name: str = "default", *, heartbeat_timeout: int = 60) -> tf.distribute.Strategy:
    """The strategy named by `TrainConfig.strategy`.

    Args:
      name: "default" (no distribution), "mirrored" (every local GPU, or every logical CPU
        device when there is no GPU) or "multiworker" (`MultiWorkerMirroredStrategy`, the
        cluster read from the `TF_CONFIG` environment variable; one process per machine).

    With "multiworker", a worker that dies (killed, out of memory, its machine lost) stops
    sending heartbeats to the coordination service, which runs in the chief: within
    `heartbeat_timeout` seconds (`TrainConfig.heartbeat_timeout`; sooner when its connections
    are refused; with TensorFlow's own 10 s a CI run on 2 cores lost a live worker) the
    collectives of the other workers fail with `tf.errors.UnavailableError` (the training loop
    reports it as `WorkerLostError`) instead of waiting for ever.

    Raises:
      ValueError: an unknown name, or "multiworker" without a valid TF_CONFIG.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = None
        if not tf.config.list_logical_devices("GPU"):
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multiworker":
        cluster, _ = cluster_and_task()  # refuses a missing or malformed TF_CONFIG in one line
        if context.context().coordination_service is None:  # as the strategy would, but patient
            jobs = [
                coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(cluster[job]))
                for job in ("chief", "worker")
                if job in cluster
            ]
            context.context().configure_coordination_service(
                service_type="standalone",
                service_leader=multi_worker_util.coordination_leader(tf.train.ClusterSpec(cluster)),
                coordinated_jobs=jobs,
                heartbeat_timeout_in_ms=heartbeat_timeout * 1000,
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise InvalidValueError(f"Unknown strategy {name!r}; choose default, mirrored or multiworker.")


def cluster_and_task() -> tuple[dict, dict]:
    """`(cluster, task)` of the `TF_CONFIG` environment variable, checked.

    Raises:
      ValueError: TF_CONFIG is missing, not JSON, or lacks the cluster or this task.
    """
    tf_config = os.environ.get("TF_CONFIG")
    if not tf_config:
        raise InvalidValueError("--strategy multiworker needs the TF_CONFIG environment variable.")
    try:
        config = json.loads(tf_config)
        cluster, task = config["cluster"], config.get("task", {})
        task_type, index = task["type"], int(task["index"])
        cluster[task_type][index]
    except (ValueError, KeyError, TypeError, IndexError):
        raise InvalidValueError(
            "TF_CONFIG is not JSON with a 'cluster' entry and this process's 'task' "
            '(e.g. {"cluster": {"worker": ["host0:port", "host1:port"]}, '
            '"task": {"type": "worker", "index": 0}}).'
        ) from None
    return cluster, task


def is_chief(strategy: tf.distribute.Strategy | None = None) -> bool:
    """Whether this process writes the run directory (config, checkpoints, summaries).

    The chief is the "chief" task, else worker 0 (TF_CONFIG's convention). Every process is
    the chief unless `strategy` is a multi-worker strategy or, with `strategy=None`, the
    `TF_CONFIG` environment variable names a cluster of more than one task.
    """
    if strategy is not None:
        resolver = getattr(strategy, "cluster_resolver", None)
        if resolver is None or not resolver.task_type:
            return True
        task_type, index = resolver.task_type, resolver.task_id
        has_chief = "chief" in resolver.cluster_spec().jobs
    else:
        if not os.environ.get("TF_CONFIG"):
            return True
        cluster, task = cluster_and_task()
        task_type, index = task["type"], int(task["index"])
        has_chief = "chief" in cluster
    if task_type == "chief":
        return True
    return task_type == "worker" and index == 0 and not has_chief


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """Processes training together (1 unless `strategy` spans several workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return 1
    spec = resolver.cluster_spec()
    return sum(spec.num_tasks(job) for job in ("chief", "worker") if job in spec.jobs)


class Workers:
    """Agreement between the workers of a multi-worker job, through collectives.

    The training loops of a multi-worker job stop together: a signal, a time budget or a
    patience verdict seen by one worker alone would leave the others waiting in their next
    step. Every worker must make the same calls in the same order. Without several workers
    each call returns its argument, with no collective.

    It also says whether this process is the chief (`is_chief`): a training call makes one
    `Workers` and every part of it reads `chief` from there.

    Args:
      strategy: the training strategy.

    Attributes:
      chief: whether this process writes the run directory.
      multi_worker: whether several processes train together.
    """

    def __init__(self, strategy: tf.distribute.Strategy):
        self.strategy = strategy
        self.chief = is_chief(strategy)
        self.multi_worker = num_workers(strategy) > 1
        self._sum = tf.function(self._sum_over_replicas, autograph=False)

    def any(self, flag: bool) -> bool:
        """True when `flag` is true in any worker."""
        if not self.multi_worker:
            return bool(flag)
        return bool(self._sum(tf.constant(float(flag))) > 0)

    def mean(self, value: float) -> float:
        """`value` averaged over the workers: one number that every worker agrees on, e.g. the
        fraction of a time budget left by their clocks."""
        if not self.multi_worker:
            return float(value)
        # Every replica of a worker adds that worker's value (the same number of replicas each).
        return float(self._sum(tf.constant(float(value)))) / self.strategy.num_replicas_in_sync

    def _sum_over_replicas(self, value):
        strategy = self.strategy
        return strategy.reduce("SUM", strategy.run(tf.identity, args=(value,)), axis=None)


def describe_lost_worker(error: Exception) -> str:
    """What a collective's error says about the worker that stopped, in one line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "unhealthy" in line:  # the coordination service's heartbeats
            tasks = [task for task in lines[i + 1 :] if task.startswith("/job:")]
            return f"{', '.join(tasks) or 'a task'} stopped sending heartbeats"
    for line in lines:
        if "aborted by:" in line:
            return line.split("aborted by:", 1)[1].strip()
    return lines[0] if lines else type(error).__name__


def input_shard(context: tf.distribute.InputContext | None) -> Shard:
    """The part of an epoch's pairs that the input pipeline of `context` reads: part
    `input_pipeline_id` of `num_input_pipelines` (the whole epoch without a context).

    Give it to `Mix.pairs(seed, shard=...)` inside a `distribute_datasets_from_function`
    pipeline: each worker then reads only its pieces of a file corpus (its lines when the
    corpus has fewer pieces than workers), tf.data's auto-sharding off, and the workers'
    parts together hold the epoch's pairs once (`TrainConfig.shard_data`; see
    the module docstring).
    """
    if context is None:
        return Shard()
    return Shard(context.input_pipeline_id, context.num_input_pipelines)


def empty_batch(element_spec) -> tuple:
    """A batch of no sentences shaped like `element_spec`: every tensor `(0, 1)`.

    It has no tokens, so it adds nothing to a loss sum, a token count or a gradient; it
    completes the last group of an epoch so that every replica takes the same number of steps.
    """
    return tf.nest.map_structure(lambda spec: tf.zeros((0, 1), spec.dtype), element_spec)


def replica_batches(
    dataset: tf.data.Dataset, *, group_size: int, start: int, count: int
) -> tf.data.Dataset:
    """Batches `start … start + count - 1` of every group of `group_size` consecutive batches.

    The last group is completed with `empty_batch`es, so every slice of every group is full:
    the `group_size // count` slices of a dataset together hold each batch once (see the
    module docstring for why the groups are cut this way).

    Args:
      dataset: batches `((src, tgt_in), tgt_out)`, the same sequence on every worker.
      group_size: batches per update (`replicas × accumulate_steps`).
      start, count: this input pipeline's slice of each group.
    """
    if group_size == 1:
        return dataset
    empty = empty_batch(dataset.element_spec)
    padded = dataset.concatenate(tf.data.Dataset.from_tensors(empty).repeat(group_size - 1))
    windows = padded.window(group_size, drop_remainder=True)
    return windows.flat_map(
        tf.autograph.experimental.do_not_convert(
            lambda *window: tf.data.Dataset.zip(window).skip(start).take(count)
        )
    ).prefetch(tf.data.AUTOTUNE)


def distribute_batches(strategy: tf.distribute.Strategy, dataset, group_size: int | None = None):
    """`dataset` as the replicas of `strategy` take it: whole batches, one per replica and step.

    Each step takes the next group of `group_size` batches (default: one per replica; with
    gradient accumulation, `replicas × accumulate_steps`): worker `w` iterates its slice of
    every group (`replica_batches`) and its local replicas take consecutive batches of it.
    Without distribution: the plain dataset (with its last group completed).

    `dataset` may also be a function `Shard -> batches` (`TrainConfig.shard_data`): each worker
    then iterates the batches of its own part, its share of a group per step (see the module
    docstring).
    """
    group_size = group_size or strategy.num_replicas_in_sync
    if strategy.num_replicas_in_sync == 1:
        dataset = dataset(Shard()) if callable(dataset) else dataset
        return replica_batches(dataset, group_size=group_size, start=0, count=group_size)

    def pipeline(context: tf.distribute.InputContext) -> tf.data.Dataset:
        count = group_size // context.num_input_pipelines
        if callable(dataset):  # this worker's own batches
            own = dataset(input_shard(context))
            return replica_batches(own, group_size=count, start=0, count=count)
        start = context.input_pipeline_id * count
        return replica_batches(dataset, group_size=group_size, start=start, count=count)

    return strategy.distribute_datasets_from_function(pipeline)
