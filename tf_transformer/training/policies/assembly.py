"""`TrainingPolicies`: the policies of one training call, made the same way for the custom loop
and `model.fit`, and called in one order; `PolicyInputs`: what they read of the call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.run_dir import RunDir
from tf_transformer.training.distribute import Workers
from tf_transformer.training.policies.average_last import AverageLast
from tf_transformer.training.policies.budget import Budget
from tf_transformer.training.policies.progress import Progress
from tf_transformer.training.policies.standard import (
    Checkpoints,
    CoolDown,
    NonFiniteLoss,
    StopRules,
)
from tf_transformer.training.policies.stop_signal import StopSignal
from tf_transformer.training.policies.validate_every import Validate, ValidateEvery
from tf_transformer.training.result import TrainResult


@dataclasses.dataclass(frozen=True)
class PolicyInputs:
    """What the policies of one training call read of it, and nothing more.

    `training.session.Session.policy_inputs` makes it: the session imports the policies, and the
    policies never import the session.

    Attributes:
      run: the run directory (the averaged checkpoint goes there; a worker other than the chief
        reports the chief's latest checkpoint).
      model_config: the model's configuration (builds the model the averaged checkpoints restore
        into).
      train_config: the limits, the checkpoint and evaluation periods, `average_last`.
      workers: the agreement between the workers; `workers.chief` says who writes.
      started: `time.monotonic()` when the call started (`max_minutes` counts from it).
      validation_writer: returns the `logs/validation` summary writer; called only when the
        call evaluates, so a call that does not makes no `logs/validation`.
    """

    run: RunDir
    model_config: ModelConfig
    train_config: TrainConfig
    workers: Workers
    started: float
    validation_writer: Callable[[], tf.summary.SummaryWriter]


@dataclasses.dataclass
class TrainingPolicies:
    """The policies of one training call, made the same way for the custom loop and `fit`.

    Attributes:
      inputs: what the policies read of the call.
      progress: where the call stands.
      cool_down, non_finite, checkpoints, stop_rules: always there.
      validation: with a validation hook and `eval_every`.
      average: on the chief, with `average_last` > 1.
    """

    inputs: PolicyInputs
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
        inputs: PolicyInputs,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        signal: StopSignal,
        optimizer: tf.keras.optimizers.Optimizer | None = None,
        validate: Validate | None = None,
        verbose: bool = False,
        restored: str | None = None,
    ) -> TrainingPolicies:
        """The policies of `inputs.train_config`.

        `optimizer` defaults to the model's (`fit`); `validate` writes into
        `inputs.validation_writer()`; `restored` is the checkpoint the call resumed from.
        """
        config, workers = inputs.train_config, inputs.workers
        budget = Budget(
            max_steps=config.max_steps,
            max_minutes=config.max_minutes,
            epochs=config.epochs,
            started=inputs.started,
        )
        evaluating = validate is not None and config.eval_every is not None
        checkpoints = Checkpoints(
            progress=progress,
            manager=manager,
            every=config.checkpoint_every,
            eval_every=config.eval_every if evaluating else None,
            restored=restored,
        )
        validation = None
        if evaluating:
            validation = ValidateEvery(
                progress=progress,
                validate=validate,
                every=config.eval_every,
                writer=inputs.validation_writer(),
                workers=workers,
                verbose=verbose,
            )
        average = None
        if workers.chief and config.average_last > 1:
            average = AverageLast(
                progress=progress,
                manager=manager,
                count=config.average_last,
                run=inputs.run,
                model_config=inputs.model_config,
                validation=validation,
                verbose=verbose,
            )
        return cls(
            inputs=inputs,
            progress=progress,
            cool_down=CoolDown(
                progress=progress, budget=budget, optimizer=optimizer, workers=workers
            ),
            non_finite=NonFiniteLoss(progress=progress, checkpoints=checkpoints),
            checkpoints=checkpoints,
            stop_rules=StopRules(progress=progress, budget=budget, signal=signal, workers=workers),
            validation=validation,
            average=average,
        )

    def callbacks(self, *, after_step: tuple = ()) -> list[tf.keras.callbacks.Callback]:
        """The callbacks in the order they run; `after_step` (logging) right after the check
        of the loss, before anything saves or stops."""
        ordered = (self.cool_down, self.non_finite, *after_step, self.checkpoints)
        ordered += (self.validation, self.stop_rules, self.average)
        return [callback for callback in ordered if callback is not None]

    def result(self, model: tf.keras.Model, history: list[dict]) -> TrainResult:
        """The `TrainResult` of the call (a worker other than the chief names the chief's
        latest checkpoint, and reports no evaluations)."""
        progress, run, chief = self.progress, self.inputs.run, self.inputs.workers.chief
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
