"""The policies every training call has, written once for the custom loop and `model.fit`
(Keras callbacks, see `policies.progress`): the stop rules, the cool-down, the checkpoints and
the non-finite loss check.

Within a step they run in the order `TrainingPolicies.callbacks` gives: `CoolDown` before the
step; after it `NonFiniteLoss` (which raises before anything is saved), `Checkpoints`,
`ValidateEvery` (dev BLEU, `checkpoints/best/`, patience), then `StopRules`, which decides last,
so that an evaluation's time counts before the run goes on; at the end `Checkpoints` saves and
`AverageLast` averages.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_transformer.errors import TransformerError
from tf_transformer.training.distribute import Workers
from tf_transformer.training.policies.budget import Budget
from tf_transformer.training.policies.progress import Policy, Progress
from tf_transformer.training.policies.stop_signal import StopSignal
from tf_transformer.training.result import StopReason
from tf_transformer.training.step.schedule import find_cooldown


class NonFiniteLossError(FloatingPointError, TransformerError):
    """The loss became NaN or infinite; the run stopped without saving that state."""


class StopRules(Policy):
    """Stops the run by `budget`'s rules (steps, minutes, epochs) and on SIGINT/SIGTERM.

    The workers of a multi-worker job stop at the same step: a signal or a time budget seen
    by one of them stops all (`StopReason.ANOTHER_WORKER` in the others). The run stops with
    `stopped_by` the signal's `StopReason`, `MAX_STEPS` or `MAX_MINUTES`; None when all epochs
    ran.

    Args:
      progress: the run's progress.
      budget: the limits.
      signal: the `StopSignal` the trainer entered.
      workers: the agreement between workers (default: one process).
    """

    def __init__(
        self,
        *,
        progress: Progress,
        budget: Budget,
        signal: StopSignal,
        workers: Workers | None = None,
    ):
        super().__init__(progress=progress)
        self.budget = budget
        self.signal = signal
        self.workers = workers or Workers(tf.distribute.get_strategy())

    def on_train_begin(self, logs=None):
        # A resumed run may have nothing left to do.
        if self.budget.steps_done(self.progress.step):
            self.stop(StopReason.MAX_STEPS)
        elif self.budget.epochs_done(self.progress.epoch):
            self.stop(None)

    def on_train_batch_end(self, batch, logs=None):
        steps_done = self.budget.steps_done(self.progress.step)
        local = bool(self.signal.requested) or self.budget.out_of_time()
        if not self.workers.any(local) and not steps_done:
            return
        if self.signal.requested:
            self.stop(self.signal.requested)
        elif steps_done:
            self.stop(StopReason.MAX_STEPS)
        else:
            self.stop(
                StopReason.MAX_MINUTES if self.budget.out_of_time() else StopReason.ANOTHER_WORKER
            )

    def on_epoch_end(self, epoch, logs=None):
        if self.budget.epochs_done(self.progress.epoch):
            self.stop(None)


class CoolDown(Policy):
    """Before each step, tells the optimizer's `Cooldown` schedule how much of `budget` is
    left (every worker the same number: their clocks differ). Does nothing without one.

    Args:
      progress: the run's progress.
      budget: the limits the rate cools down towards.
      optimizer: the optimizer (default: the model's, as compiled for `fit`).
      workers: the agreement between workers (default: one process).
    """

    def __init__(self, *, progress: Progress, budget: Budget, optimizer=None, workers=None):
        super().__init__(progress=progress)
        self.budget = budget
        self.optimizer = optimizer
        self.workers = workers or Workers(tf.distribute.get_strategy())
        self.cooldown = None

    def on_train_begin(self, logs=None):
        self.cooldown = find_cooldown(self.optimizer or self.model.optimizer)

    def on_train_batch_begin(self, batch, logs=None):
        if self.cooldown is None:
            return
        progress = self.progress
        left = self.budget.left(
            progress.step,
            epoch=progress.epoch,
            position=progress.position,
            batches_per_epoch=progress.batches_per_epoch,
        )
        self.cooldown.set_left(self.workers.mean(left))


class Checkpoints(Policy):
    """Saves the run every `every` steps and at the steps `ValidateEvery` evaluates (so that
    `checkpoints/best/` names a step that `checkpoints/` holds too), at each epoch end and when
    the run ends; never the same state twice, and never a step already saved (the manager keeps
    that checkpoint: see `CheckpointManager`).

    Args:
      progress: the run's progress (its `state` is in `manager`'s checkpoint).
      manager: the `CheckpointManager` of model, optimizer and state.
      every: steps between checkpoints.
      eval_every: steps between evaluations, or None.
      restored: the checkpoint the run resumed from, if any.
    """

    def __init__(
        self,
        *,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        every: int,
        eval_every: int | None = None,
        restored: str | None = None,
    ):
        super().__init__(progress=progress)
        self.manager = manager
        self.every = every
        self.eval_every = eval_every
        self.last = restored  # the last checkpoint written (or restored)
        self._saved = None  # the key of the state last saved
        self._step = None  # the step last seen

    def on_train_begin(self, logs=None):
        self._saved = self.progress.key() if self.last else None
        self._step = self.progress.step

    def on_train_batch_end(self, batch, logs=None):
        step, seen = self.progress.step, self._step
        # `fit` calls this once per micro-batch when it accumulates: once per step is enough.
        self._step = step
        if step == seen:
            return
        if step % self.every == 0 or (self.eval_every and step % self.eval_every == 0):
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        self.save()

    def on_train_end(self, logs=None):
        self.save()

    def save(self) -> None:
        if self.progress.key() != self._saved:
            self.last = self.manager.save(checkpoint_number=self.progress.state.step)
            self._saved = self.progress.key()


class NonFiniteLoss(Policy):
    """Stops the run at the first step whose loss is NaN or infinite, by raising
    `NonFiniteLossError`, before any policy saves that step; the run goes back to weights that
    gave a finite loss.

    A step's loss is computed before its update, with the weights of the step before: a
    checkpoint saved at step N-1 holds the weights that gave step N's loss. So each finite loss
    proves the newest checkpoint (`CheckpointManager.prove`), and a non-finite one removes it
    when unproven (`discard_unproven`): the state file then names the newest checkpoint whose
    weights gave a finite loss, which the error names.

    It raises rather than setting `stop_training` (as Keras' `TerminateOnNaN` does): a stopped
    run still ends its epoch and saves, which would write the broken weights over the last good
    ones (checkpoints, and `fit`'s backup and model.keras).

    Args:
      progress: the run's progress.
      checkpoints: the run's checkpoints (proved, rolled back, named in the error).
    """

    def __init__(self, *, progress: Progress, checkpoints: Checkpoints):
        super().__init__(progress=progress)
        self.checkpoints = checkpoints

    def on_train_batch_end(self, batch, logs=None):
        if "loss" not in (logs or {}):
            raise KeyError(f"the logs of step {self.progress.step} hold no 'loss': {logs}")
        loss = np.asarray(logs["loss"], dtype=np.float64)
        manager = self.checkpoints.manager
        if np.all(np.isfinite(loss)):
            if hasattr(manager, "prove"):
                manager.prove()
            return
        removed = manager.discard_unproven() if hasattr(manager, "discard_unproven") else None
        good = self.checkpoints.last = manager.latest_checkpoint
        said = f"{removed}, whose weights gave it, was removed; " if removed else ""
        if good:
            kept = f"the latest checkpoint is now {good}, whose weights gave a finite loss"
            then = "then continue with --resume"
        else:
            kept = "no checkpoint is left that gave a finite loss"
            then = "then start over with --overwrite"
        raise NonFiniteLossError(
            f"the loss became {float(loss.ravel()[0])} at step {self.progress.step} (epoch "
            f"{self.progress.epoch + 1}); stopped without saving. {said}{kept}. Lower the "
            f"learning rate (--warmup-steps) or train in float32, {then}."
        )
