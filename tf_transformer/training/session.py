"""What the custom loop and `model.fit` share around the step: the run's start, its policies,
its result, and a lost worker."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.errors import TransformerError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.average_last import AverageLast
from tf_transformer.training.budget import Budget
from tf_transformer.training.checkpoints import StopSignal
from tf_transformer.training.distribute import (
    Workers,
    describe_lost_worker,
    get_strategy,
    is_chief,
)
from tf_transformer.training.policies import (
    Checkpoints,
    CoolDown,
    NonFiniteLoss,
    Progress,
    StopRules,
)
from tf_transformer.training.validate_every import Validate, ValidateEvery


class WorkerLostError(RuntimeError, TransformerError):
    """Another worker of a multi-worker job stopped (killed, crashed); this one stopped too."""


# What a collective raises in the surviving workers when a peer dies (the coordination
# service's heartbeats, or a connection refused).
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)


@dataclasses.dataclass
class TrainResult:
    """What a training call (the custom loop or `model.fit`) did.

    Attributes:
      model: the trained model.
      step: optimizer steps taken in total (across resumes).
      epoch: completed epochs.
      stopped_by: "SIGINT"/"SIGTERM" when a signal stopped the run, "max_steps",
        "max_minutes" (the wall-clock budget), "patience" (dev BLEU stopped improving),
        "another worker" (a signal or time budget seen by another worker of a multi-worker
        job), or None when all epochs ran.
      checkpoint: the last checkpoint written (or restored).
      averaged_checkpoint: the averaged checkpoint, when `average_last` asked for one.
      history: one dict per epoch finished in this call (loss, accuracy, val_loss, ...).
      evaluations: one `Evaluation.to_dict()` per validation in this call (`eval_every`).
      eval_seconds: the time those took, spent inside the training budget.
      best_checkpoint: the best checkpoint by dev BLEU (`checkpoints/best/`), if any.
    """

    model: tf.keras.Model
    step: int
    epoch: int
    stopped_by: str | None
    checkpoint: str | None
    averaged_checkpoint: str | None = None
    history: list[dict] = dataclasses.field(default_factory=list)
    evaluations: list[dict] = dataclasses.field(default_factory=list)
    eval_seconds: float = 0.0
    best_checkpoint: str | None = None


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


def open_run(
    run_dir: str | Path | RunDir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    *,
    data: dict | None = None,
    strategy: tf.distribute.Strategy | None = None,
) -> tuple[RunDir, tf.distribute.Strategy, bool]:
    """Starts a training call: the chief records the configs; every worker seeds alike.

    Returns:
      `(run, strategy, chief)`.
    """
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    strategy = strategy or get_strategy(train_config.strategy)
    chief = is_chief(strategy)
    if chief:
        write_run_config(run, model_config, train_config, data)
    tf.keras.utils.set_random_seed(train_config.seed)
    return run, strategy, chief


@contextlib.contextmanager
def watching_peers(workers: Workers, stopped_at: Callable[[], str]) -> Iterator[None]:
    """Turns the error of a collective whose peer died into one `WorkerLostError` line;
    `stopped_at()` says where this worker stopped and where a relaunch resumes."""
    try:
        yield
    except _PEER_ERRORS as error:
        if not workers.multi_worker:
            raise
        raise WorkerLostError(
            f"a worker of the multi-worker job stopped ({describe_lost_worker(error)}); "
            f"{stopped_at()}"
        ) from None


@dataclasses.dataclass
class TrainingPolicies:
    """The policies of one training call, made the same way for the custom loop and `fit`.

    Attributes:
      progress: where the call stands.
      cool_down, non_finite, checkpoints, stop_rules: always there.
      validation: with a validation hook and `eval_every`.
      average: on the chief, with `average_last` > 1.
    """

    progress: Progress
    cool_down: CoolDown
    non_finite: NonFiniteLoss
    checkpoints: Checkpoints
    stop_rules: StopRules
    validation: ValidateEvery | None = None
    average: AverageLast | None = None

    @classmethod
    def make(
        cls,
        *,
        run: RunDir,
        model_config: ModelConfig,
        train_config: TrainConfig,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        signal: StopSignal,
        workers: Workers,
        started: float,
        optimizer: tf.keras.optimizers.Optimizer | None = None,
        validate: Validate | None = None,
        writer=None,
        chief: bool = True,
        verbose: bool = False,
        restored: str | None = None,
    ) -> TrainingPolicies:
        """The policies of `train_config` for a call started at `started` (`time.monotonic()`).

        `optimizer` defaults to the model's (`fit`); `writer` is the `logs/validation` summary
        writer that `validate` writes into; `restored` the checkpoint the call resumed from.
        """
        config = train_config
        budget = Budget(config.max_steps, config.max_minutes, config.epochs, started)
        evaluating = validate is not None and config.eval_every is not None
        checkpoints = Checkpoints(
            progress,
            manager=manager,
            every=config.checkpoint_every,
            eval_every=config.eval_every if evaluating else None,
            restored=restored,
        )
        validation = None
        if evaluating:
            validation = ValidateEvery(
                progress,
                validate=validate,
                every=config.eval_every,
                writer=writer,
                workers=workers,
                chief=chief,
                verbose=verbose,
            )
        average = None
        if chief and config.average_last > 1:
            average = AverageLast(
                progress,
                manager=manager,
                count=config.average_last,
                run=run,
                model_config=model_config,
                validation=validation,
                verbose=verbose,
            )
        return cls(
            progress=progress,
            cool_down=CoolDown(progress, budget=budget, optimizer=optimizer, workers=workers),
            non_finite=NonFiniteLoss(progress, checkpoints=checkpoints),
            checkpoints=checkpoints,
            stop_rules=StopRules(progress, budget=budget, signal=signal, workers=workers),
            validation=validation,
            average=average,
        )

    def callbacks(self, *, after_step: tuple = ()) -> list[tf.keras.callbacks.Callback]:
        """The callbacks in the order they run; `after_step` (logging) right after the check
        of the loss, before anything saves or stops."""
        ordered = (self.cool_down, self.non_finite, *after_step, self.checkpoints)
        ordered += (self.validation, self.stop_rules, self.average)
        return [callback for callback in ordered if callback is not None]

    def result(
        self, model: tf.keras.Model, run: RunDir, *, history: list[dict], chief: bool = True
    ) -> TrainResult:
        """The `TrainResult` of the call (a worker other than the chief names the chief's
        latest checkpoint, and reports no evaluations)."""
        progress = self.progress
        result = TrainResult(
            model=model,
            step=progress.step,
            epoch=progress.epoch,
            stopped_by=progress.stopped_by,
            checkpoint=self.checkpoints.last if chief else run.latest_checkpoint(),
            history=history,
        )
        if not chief:
            return result
        if self.validation is not None:
            result.evaluations = [e.to_dict() for e in self.validation.evaluations]
            result.eval_seconds = self.validation.seconds
        if self.average is not None:
            result.averaged_checkpoint = self.average.averaged
        result.best_checkpoint = run.latest_checkpoint("best")
        return result
