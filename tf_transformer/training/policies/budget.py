"""The limits of a training call (steps, minutes, epochs): the stop rules, and how much is left.

Each limit is defined here once; `tf_transformer.training.policies.standard.StopRules` stops the custom
loop and `model.fit` by these rules, and `CoolDown` feeds `left` to the learning-rate cooldown.
"""

from __future__ import annotations

import time


class Budget:
    """The budget of one training call: steps, minutes and epochs, whichever ends it first.

    `left(...)` is the fraction still to run, from 1.0 at the start to 0.0 at the end: the
    smallest of the fractions of the steps (`max_steps` counts all steps of the run, a resumed
    one included), of the minutes (counted from `started`) and of the epochs that are set. A
    part whose size is not known yet (the batches of an epoch, before one has been counted)
    does not count.

    Args:
      max_steps: the run's last step, or None.
      max_minutes: the call's wall-clock budget, or None.
      epochs: the run's last epoch, or None.
      started: `time.monotonic()` at the start of the call (default: now).
    """

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        max_minutes: float | None = None,
        epochs: int | None = None,
        started: float | None = None,
    ):
        self.max_steps = max_steps
        self.seconds = None if max_minutes is None else 60.0 * float(max_minutes)
        self.epochs = epochs
        self.started = time.monotonic() if started is None else started

    @property
    def bounded(self) -> bool:
        """Whether anything ends the call (else there is nothing to cool down towards)."""
        return any(part is not None for part in (self.max_steps, self.seconds, self.epochs))

    # The stop rules.

    def steps_done(self, step: int) -> bool:
        """`max_steps` reached: the step that reaches it is the last."""
        return self.max_steps is not None and step >= self.max_steps

    def out_of_time(self, now: float | None = None) -> bool:
        """`max_minutes` spent: the step that crosses it is the last."""
        now = time.monotonic() if now is None else now
        return self.seconds is not None and now - self.started >= self.seconds

    def epochs_done(self, epoch: int) -> bool:
        """`epochs` finished (`epoch` counts finished epochs)."""
        return self.epochs is not None and epoch >= self.epochs

    # The fraction left (the cooldown's input).

    def left(
        self,
        step: int,
        *,
        epoch: int = 0,
        position: int = 0,
        batches_per_epoch: int | None = None,
        now: float | None = None,
    ) -> float:
        """The fraction of the budget still to run after `step` steps.

        Args:
          step: optimizer steps taken so far.
          epoch: epochs finished so far.
          position: batches of the current epoch taken so far.
          batches_per_epoch: the size of an epoch, once known.
          now: `time.monotonic()` (default: now).
        """
        fractions = [1.0]
        if self.max_steps is not None:
            fractions.append(1.0 - step / self.max_steps)
        if self.seconds is not None:
            now = time.monotonic() if now is None else now
            fractions.append(1.0 - (now - self.started) / self.seconds)
        if self.epochs is not None and batches_per_epoch:
            done = epoch + min(position / batches_per_epoch, 1.0)
            fractions.append(1.0 - done / self.epochs)
        return min(max(min(fractions), 0.0), 1.0)
