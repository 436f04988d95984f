"""`Session`: what the custom loop and `model.fit` share around the step: the call's start
(config.json, the seed), its checkpoint manager, its policies, and a lost worker."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.errors import TransformerError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import make_checkpoint_manager
from tf_transformer.training.distribute import Workers, describe_lost_worker, get_strategy
from tf_transformer.training.logs import file_writer
from tf_transformer.training.policies.assembly import TrainingPolicies
from tf_transformer.training.policies.progress import Progress
from tf_transformer.training.policies.stop_signal import StopSignal


class WorkerLostError(RuntimeError, TransformerError):
    """Another worker of a multi-worker job stopped (killed, crashed); this one stopped too."""


# What a collective raises in the surviving workers when a peer dies (the coordination
# service's heartbeats, or a connection refused).
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)


def write_run_config(
    run: RunDir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data: dict | None = None,
) -> None:
    """Records the configs (and the data, when given) in config.json, in one write.

    Refuses a run directory that holds checkpoints of another model configuration.
    """
    config = run.read_config() if run.exists() else {}
    previous = config.get("model")
    changed = previous is not None and ModelConfig.from_dict(previous) != model_config
    if changed and tf.train.latest_checkpoint(str(run.checkpoints_path)):
        raise ValueError(
            f"{run.root} holds checkpoints of another model configuration; use a new "
            "--run-dir or --overwrite."
        )
    config.update(model=model_config.to_dict(), train=train_config.to_dict())
    if data is not None:
        config["data"] = data
    config.setdefault("data", {})
    run.write_config(config)


@dataclasses.dataclass
class Session:
    """One training call, the custom loop's or `model.fit`'s: what both do around the step.

    Attributes:
      run: the run directory.
      model_config, train_config: the call's configs.
      strategy: the `tf.distribute` strategy.
      chief: whether this process writes the run directory.
      workers: the agreement between the workers of a multi-worker job.
      started: `time.monotonic()` when the call started (`max_minutes` counts from it).
    """

    run: RunDir
    model_config: ModelConfig
    train_config: TrainConfig
    strategy: tf.distribute.Strategy
    chief: bool
    workers: Workers
    started: float

    @classmethod
    def open(
        cls,
        run: RunDir,
        model_config: ModelConfig,
        train_config: TrainConfig,
        data: dict | None = None,
        strategy: tf.distribute.Strategy | None = None,
        workers: Workers | None = None,
    ) -> Session:
        """Starts a call: the chief records the configs (and `data`); every worker seeds alike.

        `workers` (made by `training.run`, which decided the chief) or else `strategy` (default:
        `train_config.strategy`) says who trains.
        """
        started = time.monotonic()
        workers = workers or Workers(strategy or get_strategy(train_config.strategy))
        if workers.chief:
            write_run_config(run, model_config, train_config, data)
        tf.keras.utils.set_random_seed(train_config.seed)
        return cls(
            run, model_config, train_config, workers.strategy, workers.chief, workers, started
        )

    def checkpoint_manager(
        self, directory: Path, *, model, optimizer, state
    ) -> tf.train.CheckpointManager:
        """The manager of the call's checkpoints in `directory`: it keeps `keep_checkpoints`,
        or the `average_last` that the end averages."""
        config = self.train_config
        return make_checkpoint_manager(
            directory,
            model=model,
            optimizer=optimizer,
            state=state,
            max_to_keep=max(config.keep_checkpoints, config.average_last),
        )

    @functools.cached_property
    def validation_writer(self):
        """The `logs/validation` summary writer (made when first asked for): dev BLEU, and the
        custom loop's validation loss."""
        return file_writer(self.run.logs_path / "validation", chief=self.chief)

    @contextlib.contextmanager
    def policies(
        self,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        *,
        resume_from: Callable[[], str],
        **options,
    ) -> Iterator[TrainingPolicies]:
        """The call's policies (`TrainingPolicies.make`'s `options`), inside SIGINT/SIGTERM
        handling; a collective that fails because a peer died raises one `WorkerLostError`
        line, which says where this worker stopped and, by `resume_from()`, where a relaunch
        with --resume continues."""
        try:
            with StopSignal() as signal:
                yield TrainingPolicies.make(
                    session=self, progress=progress, manager=manager, signal=signal, **options
                )
        except _PEER_ERRORS as error:
            if not self.workers.multi_worker:
                raise
            raise WorkerLostError(
                f"a worker of the multi-worker job stopped ({describe_lost_worker(error)}); "
                f"this worker stopped at step {progress.step}. Relaunch every worker with "
                f"--resume to continue from {resume_from()}."
            ) from None
