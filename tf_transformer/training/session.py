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
from tf_transformer.errors import InvalidValueError, TransformerError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import make_checkpoint_manager
from tf_transformer.training.distribute import Workers, describe_lost_worker, strategy_for
from tf_transformer.training.logs import file_writer
from tf_transformer.training.policies.assembly import PolicyInputs, TrainingPolicies
from tf_transformer.training.policies.progress import Progress
from tf_transformer.training.policies.stop_signal import StopSignal
from tf_transformer.training.step.mixed_precision import (
    AUTO,
    Precision,
    resolve_mixed_precision,
)


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
    precision: Precision | None = None,
) -> None:
    """Records the configs (and the data, when given) in config.json, in one write.

    `precision` (the run's resolved mixed precision) goes under "mixed_precision" as
    `{"auto", "chosen", "reason"}`, beside "train", whose `mixed_precision` holds the resolved value:
    config.json stays what `TrainConfig.from_dict` reads (runs written before have no such entry).
    Refuses a run directory that holds checkpoints of another model configuration.
    """
    config = run.read_config() if run.exists() else {}
    previous = config.get("model")
    changed = previous is not None and ModelConfig.from_dict(previous) != model_config
    if changed and tf.train.latest_checkpoint(str(run.checkpoints_path)):
        raise InvalidValueError(
            f"{run.root} holds checkpoints of another model configuration; use a new "
            "--run-dir or --overwrite."
        )
    config.update(model=model_config.to_dict(), train=train_config.to_dict())
    if data is not None:
        config["data"] = data
    config.setdefault("data", {})
    if precision is not None:
        config["mixed_precision"] = precision.record()
    run.write_config(config)


def run_precision(run: RunDir, mixed_precision: str | None) -> Precision:
    """The mixed precision a call trains with: "auto" resolved for this machine, and so is a
    value that "auto" chose when the run started (config.json says so): a resumed run chooses
    again for the machine it runs on (its checkpoints hold float32 variables either way, and
    "auto" never picks float16's loss scaling). Any other value is used as configured."""
    recorded = run.read_config().get("mixed_precision") if run.exists() else None
    if Precision.chosen_by_auto(recorded, mixed_precision):
        mixed_precision = AUTO
    return resolve_mixed_precision(mixed_precision)


@dataclasses.dataclass
class Session:
    """One training call, the custom loop's or `model.fit`'s: what both do around the step.

    Attributes:
      run: the run directory.
      model_config, train_config: the call's configs (`mixed_precision` resolved: never
        "auto").
      strategy: the `tf.distribute` strategy.
      chief: whether this process writes the run directory.
      workers: the agreement between the workers of a multi-worker job.
      started: `time.monotonic()` when the call started (`max_minutes` counts from it).
      precision: the resolved mixed precision, and why.
    """

    run: RunDir
    model_config: ModelConfig
    train_config: TrainConfig
    strategy: tf.distribute.Strategy
    chief: bool
    workers: Workers
    started: float
    precision: Precision

    @classmethod
    def open(
        cls,
        run: RunDir,
        model_config: ModelConfig,
        train_config: TrainConfig,
        data: dict | None = None,
        strategy: tf.distribute.Strategy | None = None,
        workers: Workers | None = None,
        *,
        verbose: bool = False,
    ) -> Session:
        """Starts a call: resolves its mixed precision ("auto": `run_precision`), the chief
        records the configs (and `data`) and, when `verbose`, prints the precision chosen and
        why as the call's first line; every worker seeds alike.

        `workers` (made by `training.run`, which decided the chief) or else `strategy` (default:
        `train_config.strategy`) says who trains. The session's `train_config` holds the
        resolved `mixed_precision`: build the model and optimizer from it.
        """
        started = time.monotonic()
        workers = workers or Workers(strategy or strategy_for(train_config))
        precision = run_precision(run, train_config.mixed_precision)
        train_config = train_config.replace(mixed_precision=precision.value)
        if workers.chief:
            write_run_config(run, model_config, train_config, data, precision)
            if verbose:
                print(precision.line(), flush=True)
        tf.keras.utils.set_random_seed(train_config.seed)
        return cls(
            run,
            model_config,
            train_config,
            workers.strategy,
            workers.chief,
            workers,
            started,
            precision,
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

    def policy_inputs(self) -> PolicyInputs:
        """What the call's policies read of it: its run, configs, workers and start, and its
        `validation_writer` (made when a policy first asks for it)."""
        return PolicyInputs(
            run=self.run,
            model_config=self.model_config,
            train_config=self.train_config,
            workers=self.workers,
            started=self.started,
            validation_writer=lambda: self.validation_writer,
        )

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
                    inputs=self.policy_inputs(),
                    progress=progress,
                    manager=manager,
                    signal=signal,
                    **options,
                )
        except _PEER_ERRORS as error:
            if not self.workers.multi_worker:
                raise
            raise WorkerLostError(
                f"a worker of the multi-worker job stopped ({describe_lost_worker(error)}); "
                f"this worker stopped at step {progress.step}. Relaunch every worker with "
                f"--resume to continue from {resume_from()}."
            ) from None
