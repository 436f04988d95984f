"""`ValidateEvery`: the training policy that scores dev BLEU every N steps (loop and `fit`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.training.distribute import Workers
from tf_transformer.training.policies.progress import Policy, Progress
from tf_transformer.training.result import StopReason

if TYPE_CHECKING:
    from tf_transformer.training.best_checkpoint import Evaluation

# The validation hook: `(model, step) -> Evaluation`, e.g. a `training.validation.Validator`.
Validate = Callable[[tf.keras.Model, int], "Evaluation"]


class ValidateEvery(Policy):
    """Every `every` steps, calls `validate(model, step)` inside `writer` (dev BLEU and chrF,
    the best weights in `checkpoints/best/`: see `training.validation`); an evaluation that says
    `stop` (patience) ends the run with `StopReason.PATIENCE`.

    In a multi-worker job only the chief evaluates (`chief`); the others wait for its verdict.
    Its time counts in the run's `max_minutes` (`StopRules` decides after it).

    Args:
      progress: the run's progress.
      validate: the validation hook.
      every: steps between evaluations.
      writer: the `logs/validation` summary writer.
      workers: the agreement between workers (default: one process).
      chief: whether this process evaluates.
      verbose: print each evaluation's line.

    Attributes:
      evaluations: the `Evaluation`s of this call, in order.
      seconds: the time they took, with the averaged checkpoint's (`offer`).
    """

    def __init__(
        self,
        *,
        progress: Progress,
        validate: Validate,
        every: int,
        writer,
        workers: Workers | None = None,
        verbose: bool = False,
    ):
        super().__init__(progress=progress)
        self.validate = validate
        self.every = every
        self.writer = writer
        self.workers = workers or Workers(tf.distribute.get_strategy())
        self.chief = self.workers.chief
        self.verbose = verbose
        self.evaluations: list[Evaluation] = []
        self.seconds = 0.0
        self._step = None  # the step last seen

    def on_train_begin(self, logs=None):
        self._step = self.progress.step

    def on_train_batch_end(self, batch, logs=None):
        step, seen = self.progress.step, self._step
        # `fit` calls this once per micro-batch when it accumulates: once per step is enough.
        self._step = step
        if step == seen or step % self.every:
            return
        stop = False
        if self.chief:
            with self.writer.as_default():
                evaluation = self.validate(self.model, step)
            self.writer.flush()
            self.evaluations.append(evaluation)
            self.seconds += evaluation.seconds
            if self.verbose:
                tqdm.write(evaluation.line())
            stop = evaluation.stop
        if self.workers.any(stop):
            self.stop(StopReason.PATIENCE)

    def offer(self, model: tf.keras.Model, source: str) -> Evaluation | None:
        """Scores other weights than the run's (e.g. the averaged checkpoint) at the current
        step, keeping them as the best if they score higher (the hook's `offer`, when it has
        one); None when it has none."""
        offer = getattr(self.validate, "offer", None)
        if offer is None:
            return None
        with self.writer.as_default():
            evaluation = offer(model, self.progress.step, source)
        self.writer.flush()
        if evaluation is not None:
            self.seconds += evaluation.seconds
        return evaluation
