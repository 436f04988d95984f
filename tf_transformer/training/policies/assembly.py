"""`TrainingPolicies`: the policies of one training call, made the same way for the custom loop
and `model.fit`, and called in one order."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import tensorflow as tf

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

if TYPE_CHECKING:  # `Session` makes these policies: an annotation only, no import cycle
    from tf_transformer.training.session import Session


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
        session: Session,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        signal: StopSignal,
        optimizer: tf.keras.optimizers.Optimizer | None = None,
        validate: Validate | None = None,
        verbose: bool = False,
        restored: str | None = None,
    ) -> TrainingPolicies:
        """The policies of `session`'s `train_config`.

        `optimizer` defaults to the model's (`fit`); `validate` writes into the session's
        `validation_writer`; `restored` is the checkpoint the call resumed from.
        """
        config, workers, chief = session.train_config, session.workers, session.chief
        budget = Budget(
            max_steps=config.max_steps,
            max_minutes=config.max_minutes,
            epochs=config.epochs,
            started=session.started,
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
                writer=session.validation_writer,
                workers=workers,
                verbose=verbose,
            )
        average = None
        if chief and config.average_last > 1:
            average = AverageLast(
                progress=progress,
                manager=manager,
                count=config.average_last,
                run=session.run,
                model_config=session.model_config,
                validation=validation,
                verbose=verbose,
            )
        return cls(
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

    def result(self, model: tf.keras.Model, session: Session, history: list[dict]) -> TrainResult:
        """The `TrainResult` of the call (a worker other than the chief names the chief's
        latest checkpoint, and reports no evaluations)."""
        progress, run, chief = self.progress, session.run, session.chief
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
