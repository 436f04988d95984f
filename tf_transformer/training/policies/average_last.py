"""`AverageLast`: the training policy that averages the last checkpoints at the end of a run."""

from __future__ import annotations

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.config import ModelConfig
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import average_checkpoints
from tf_transformer.training.policies.progress import Policy, Progress
from tf_transformer.training.policies.validate_every import ValidateEvery
from tf_transformer.training.result import StopReason
from tf_transformer.training.step.build import build_model
from tf_transformer.weights import model_checkpoint

# The ends of a run that average: its budget or its patience (not a signal, not a lost peer).
FINISHED = (None, StopReason.MAX_STEPS, StopReason.MAX_MINUTES, StopReason.PATIENCE)


class AverageLast(Policy):
    """When the run ends by its budget or its patience, averages the model weights of the last
    `count` checkpoints into `run.averaged_path`, and offers the average to `validation`, which
    keeps it as `checkpoints/best` when it scores higher than the best so far (it often does).

    Args:
      progress: the run's progress.
      manager: the run's `CheckpointManager` (its last checkpoints are averaged).
      count: how many.
      run: the run directory.
      model_config: builds the model the checkpoints restore into.
      validation: the run's `ValidateEvery`, if any.
      verbose: print the average's score.

    Attributes:
      averaged: the averaged checkpoint, once written.
    """

    def __init__(
        self,
        *,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        count: int,
        run: RunDir,
        model_config: ModelConfig,
        validation: ValidateEvery | None = None,
        verbose: bool = False,
    ):
        super().__init__(progress=progress)
        self.manager = manager
        self.count = count
        self.run = run
        self.model_config = model_config
        self.validation = validation
        self.verbose = verbose
        self.averaged: str | None = None

    def on_train_end(self, logs=None):
        if self.progress.stopped_by not in FINISHED:
            return
        last = self.manager.checkpoints[-self.count :]
        self.averaged = average_checkpoints(
            last, lambda: build_model(self.model_config), self.run.averaged_path
        )
        if self.validation is not None:
            self._offer(len(last))

    def _offer(self, count: int) -> None:
        averaged = build_model(self.model_config)
        model_checkpoint(averaged).restore(self.averaged).expect_partial()
        source = f"averaged last {count}"
        evaluation = self.validation.offer(averaged, source)
        if evaluation is None or not self.verbose:
            return
        kept = (self.run.best_record() or {}).get("source") == source
        kept = "kept as the best" if kept else "not kept"
        tqdm.write(
            f"averaged last {count}: BLEU {evaluation.bleu:.1f} chrF "
            f"{evaluation.chrf:.1f} ({kept}; best {evaluation.best_bleu:.1f})"
        )
