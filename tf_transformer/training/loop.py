"""The custom training loop: `train` builds or restores the model, then `EpochLoop` runs the
epochs and steps, calling the policies as `model.fit` does."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import TrainState, restore_newest
from tf_transformer.training.distribute import Workers
from tf_transformer.training.logs import OnStep, ProgressBar, Totals, TrainSummaries, file_writer
from tf_transformer.training.policies.progress import Progress
from tf_transformer.training.policies.standard import NonFiniteLossError
from tf_transformer.training.policies.validate_every import Validate
from tf_transformer.training.result import TrainResult
from tf_transformer.training.session import Session, WorkerLostError, write_run_config
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep

__all__ = ["NonFiniteLossError", "TrainResult", "WorkerLostError", "train", "write_run_config"]

# A dataset of batches, or a function of the epoch returning that epoch's batches (the
# deterministic way to reshuffle: a resumed run rebuilds epoch k's order exactly; see
# `tf_transformer.training.start.inputs.epoch_batches`).
Batches = tf.data.Dataset | Callable[[int], tf.data.Dataset]


@tf.autograph.experimental.do_not_convert  # three casts: nothing for AutoGraph to convert
def as_int64(inputs, tgt_out):
    src, tgt_in = inputs
    return (tf.cast(src, tf.int64), tf.cast(tgt_in, tf.int64)), tf.cast(tgt_out, tf.int64)


class EpochLoop:
    """Trains epoch after epoch, step after step, until a callback stops it.

    It does what `model.fit` does for its callbacks, with `TrainStep`'s updates: before each
    update `on_train_batch_begin`, after it (and after advancing `progress`)
    `on_train_batch_end` with the update's logs `{"loss", "accuracy", "tokens", "loss_sum",
    "correct"}` (sums and means over the global batch); at an epoch end, the validation loss
    and accuracy of `val_ds` in the logs of `on_epoch_end`. Every policy (stopping,
    checkpoints, validation, ...) is such a callback (see `training.policies`); they end the
    run by setting `model.stop_training`.

    A run resumes where `progress` says: the epoch in progress, whose first `position` batches
    are skipped.

    Args:
      steps: the compiled steps of the model and optimizer.
      progress: the run's progress, which the loop advances.
      callbacks: called in this order.
      shard_data: each worker trains on its own part of each epoch (`TrainConfig.shard_data`;
        `train_ds` an `epoch, shard -> batches` function).
    """

    def __init__(
        self,
        *,
        steps: TrainStep,
        progress: Progress,
        callbacks: Sequence[tf.keras.callbacks.Callback],
        shard_data: bool = False,
    ):
        self.steps, self.shard_data = steps, shard_data
        self.progress = progress
        self.model = steps.model
        self.callbacks = tf.keras.callbacks.CallbackList(list(callbacks), model=self.model)

    def run(self, train_ds: Batches, val_ds: tf.data.Dataset | None = None) -> list[dict]:
        """Trains until a callback stops the run; returns one record per epoch finished."""
        history = []
        self.model.stop_training = False
        self.callbacks.on_train_begin()
        while not self.model.stop_training:
            epoch = self.progress.epoch
            self.callbacks.on_epoch_begin(epoch)
            self._run_epoch(train_ds, epoch)
            if not self.model.stop_training:
                history.append(self._end_epoch(epoch, val_ds))
        self.callbacks.on_train_end()
        return history

    def _run_epoch(self, train_ds: Batches, epoch: int) -> None:
        """Trains the rest of epoch `epoch`, or until a callback stops the run."""
        state, group_size = self.progress.state, self.steps.group_size
        # `position` counts the batches of the epoch's sequence already trained on (with
        # `shard_data`, of all workers' sequences together: each worker took its share).
        position = self.progress.position
        if self.shard_data and callable(train_ds):

            def data(shard):
                return train_ds(epoch, shard).map(as_int64).skip(position // shard.count)

        else:
            data = train_ds(epoch) if callable(train_ds) else train_ds
            data = data.map(as_int64).skip(position)
        for micro_batches in self.steps.updates(data):
            batch = self.progress.position // group_size
            self.callbacks.on_train_batch_begin(batch)
            sums = {key: float(value) for key, value in self.steps.update(micro_batches).items()}
            state.step.assign_add(1)
            state.position.assign_add(group_size)
            self.callbacks.on_train_batch_end(batch, {**sums, **Totals.of(sums)})
            if self.model.stop_training:
                return

    def _end_epoch(self, epoch: int, val_ds: tf.data.Dataset | None) -> dict:
        state = self.progress.state
        self.progress.batches_per_epoch = self.progress.position
        state.epoch.assign_add(1)
        state.position.assign(0)
        logs = {}
        if val_ds is not None:
            metrics = self.steps.evaluate(val_ds.map(as_int64))
            logs = {f"val_{name}": value for name, value in metrics.items()}
        self.callbacks.on_epoch_end(epoch, logs)
        return {"epoch": self.progress.epoch, "step": self.progress.step, **logs}


def train(
    run_dir: str | Path | RunDir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    train_ds: Batches,
    val_ds: tf.data.Dataset | None = None,
    *,
    data: dict | None = None,
    strategy: tf.distribute.Strategy | None = None,
    workers: Workers | None = None,
    progress: bool = True,
    on_step: Callable[[int, dict], None] | None = None,
    validate: Validate | None = None,
) -> TrainResult:
    """Trains (or resumes training) a Transformer in `run_dir` with the custom loop.

    Resumes from the latest checkpoint in `run_dir/checkpoints/`: model, optimizer, step,
    epoch and the number of batches of that epoch already seen, which are skipped. With
    dropout 0 and `train_ds` a function of the epoch (see `epoch_batches`), an interrupted
    and resumed run ends with the same weights as an uninterrupted one.

    With `accumulate_steps` N, each step (optimizer update) trains on N batches per replica,
    as one batch holding them all (see `TrainStep`); `step` counts updates. Under a
    multi-worker strategy only the chief writes config.json, checkpoints and summaries; the
    other workers save into temporary directories, removed at the end (every worker must take
    part in a save), and all restore from the chief's `checkpoints/`, so the run directory
    must be on a file system they share. A worker that dies makes the others raise
    `WorkerLostError`; relaunching every worker resumes from the last checkpoint.

    Checkpoints every `checkpoint_every` steps, at each epoch end and when stopping. SIGINT or
    SIGTERM finishes the current step, saves and returns (`stopped_by` names the signal).
    `max_minutes` bounds the wall time of this call (model building and tracing included):
    the step that crosses it is the last; the loop saves and returns with
    `stopped_by="max_minutes"` (a resumed call gets a fresh budget).
    TensorBoard scalars go to `logs/train` and `logs/validation`.

    With `validate` and `eval_every`, every `eval_every` steps the loop saves a checkpoint and
    calls `validate(model, step)` (dev BLEU, the best checkpoint; see `training.validation`)
    inside the `logs/validation` writer; its time counts in `max_minutes`, and an evaluation
    that says `stop` (patience) ends the run with `stopped_by="patience"`.

    Args:
      run_dir: the run directory (config.json is written or updated there).
      model_config: the model, with the real vocabulary sizes.
      train_config: optimizer, schedule and loop settings; a `mixed_precision` of "auto" is
        resolved here, and the choice and its reason printed first (with `progress`) and kept
        in config.json.
      train_ds: batches `((src, tgt_in), tgt_out)`, or `epoch -> batches`.
      val_ds: validation batches, evaluated at each epoch end.
      data: what the run trains on (`DataConfig.to_dict()`), recorded in config.json.
      strategy: overrides `train_config.strategy`.
      workers: who trains and who is the chief (`training.run` decides it once); overrides
        `strategy`.
      progress: show tqdm progress bars.
      on_step: called after every step with `(step, {"loss", "accuracy", "tokens"})`.
      validate: the validation hook, called every `train_config.eval_every` steps.

    Returns:
      A `TrainResult`.

    Raises:
      NonFiniteLossError: the loss became NaN/inf; the checkpoint whose weights gave it is
        removed, so the latest checkpoint is one that gave a finite loss.
      WorkerLostError: another worker of a multi-worker job stopped.
      ValueError: `run_dir` holds checkpoints of a different model configuration.
    """
    session = Session.open(
        RunDir.of(run_dir), model_config, train_config, data, strategy, workers, verbose=progress
    )
    run, strategy, chief = session.run, session.strategy, session.chief
    train_config = session.train_config  # its mixed_precision resolved ("auto")
    with strategy.scope():
        model = build_model(model_config, train_config.mixed_precision)
        optimizer = make_optimizer(model_config.d_model, train_config)
        optimizer.build(model.trainable_variables)
        state = TrainState()
    # Non-chief workers save like the chief (a save may hold collectives) into a directory of
    # their own, removed at the end (the tf.distribute multi-worker guide's pattern).
    scratch = None if chief else Path(tempfile.mkdtemp(prefix="tf_transformer_worker_"))
    directory = run.checkpoints_path if chief else scratch / "checkpoints"
    manager = session.checkpoint_manager(directory, model=model, optimizer=optimizer, state=state)
    # The newest whole checkpoint: torn ones (a full disk, a cut copy) are passed over.
    latest = restore_newest(manager.checkpoint, run.checkpoints_path)
    steps = TrainStep(
        model,
        optimizer,
        label_smoothing=train_config.label_smoothing,
        strategy=strategy,
        accumulate_steps=train_config.accumulate_steps,
    )
    status = Progress(state=state)
    logging = [
        TrainSummaries(
            progress=status,
            optimizer=optimizer,
            log_every=train_config.log_every,
            train_writer=file_writer(run.logs_path / "train", chief=chief),
            val_writer=session.validation_writer,
            verbose=progress,
        )
    ]
    if progress:
        logging.append(
            ProgressBar(progress=status, epochs=train_config.epochs, group_size=steps.group_size)
        )
    if on_step is not None:
        logging.append(OnStep(progress=status, on_step=on_step))

    try:
        with session.policies(
            status,
            manager,
            resume_from=lambda: f"the last checkpoint ({run.latest_checkpoint()})",
            optimizer=optimizer,
            validate=validate,
            verbose=progress,
            restored=latest,
        ) as policies:
            callbacks = policies.callbacks(after_step=tuple(logging))
            loop = EpochLoop(
                steps=steps,
                progress=status,
                callbacks=callbacks,
                shard_data=train_config.shard_data,
            )
            history = loop.run(train_ds, val_ds)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return policies.result(model, history)
