"""The custom training loop's entry, `train`: build or restore, run the `EpochLoop`, average."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.errors import TransformerError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import (
    StopSignal,
    TrainState,
    average_checkpoints,
    make_checkpoint_manager,
    restore_newest,
)
from tf_transformer.training.distribute import describe_lost_worker, get_strategy, is_chief
from tf_transformer.training.epoch_loop import Batches, EpochLoop, NonFiniteLossError, Validate
from tf_transformer.training.mixed_precision import build_model
from tf_transformer.training.schedule import make_optimizer
from tf_transformer.training.train_step import TrainStep
from tf_transformer.weights import model_checkpoint

__all__ = ["NonFiniteLossError", "TrainResult", "WorkerLostError", "train", "write_run_config"]


class WorkerLostError(RuntimeError, TransformerError):
    """Another worker of a multi-worker job stopped (killed, crashed); this one stopped too."""


# What a collective raises in the surviving workers when a peer dies (the coordination
# service's heartbeats, or a connection refused).
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)


@dataclasses.dataclass
class TrainResult:
    """What `train` did.

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


def train(
    run_dir: str | Path | RunDir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    train_ds: Batches,
    val_ds: tf.data.Dataset | None = None,
    *,
    data: dict | None = None,
    strategy: tf.distribute.Strategy | None = None,
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
      train_config: optimizer, schedule and loop settings.
      train_ds: batches `((src, tgt_in), tgt_out)`, or `epoch -> batches`.
      val_ds: validation batches, evaluated at each epoch end.
      data: what the run trains on (`DataConfig.to_dict()`), recorded in config.json.
      strategy: overrides `train_config.strategy`.
      progress: show tqdm progress bars.
      on_step: called after every step with `(step, {"loss", "accuracy", "tokens"})`.
      validate: the validation hook, called every `train_config.eval_every` steps.

    Returns:
      A `TrainResult`.

    Raises:
      NonFiniteLossError: the loss became NaN/inf (the last good checkpoint is kept).
      WorkerLostError: another worker of a multi-worker job stopped.
      ValueError: `run_dir` holds checkpoints of a different model configuration.
    """
    started = time.monotonic()
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    strategy = strategy or get_strategy(train_config.strategy)
    chief = is_chief(strategy)
    if chief:
        write_run_config(run, model_config, train_config, data)
    tf.keras.utils.set_random_seed(train_config.seed)
    with strategy.scope():
        model = build_model(model_config, train_config.mixed_precision)
        optimizer = make_optimizer(model_config.d_model, train_config)
        optimizer.build(model.trainable_variables)
        state = TrainState()
    # Non-chief workers save like the chief (a save may hold collectives) into a directory of
    # their own, removed at the end (the tf.distribute multi-worker guide's pattern).
    scratch = None if chief else Path(tempfile.mkdtemp(prefix="tf_transformer_worker_"))
    manager = make_checkpoint_manager(
        run.checkpoints_path if chief else scratch / "checkpoints",
        model=model,
        optimizer=optimizer,
        state=state,
        max_to_keep=max(train_config.keep_checkpoints, train_config.average_last),
    )
    # The newest whole checkpoint: torn ones (a full disk, a cut copy) are passed over.
    latest = restore_newest(manager.checkpoint, run.checkpoints_path)
    steps = TrainStep(
        model,
        optimizer,
        label_smoothing=train_config.label_smoothing,
        strategy=strategy,
        accumulate_steps=train_config.accumulate_steps,
    )
    loop = EpochLoop(run, train_config, steps, state, manager, progress, on_step, started, chief)
    loop.last_checkpoint = latest
    loop.validate = validate if train_config.eval_every else None
    try:
        with StopSignal() as stop:
            stopped_by, history = loop.run(train_ds, val_ds, stop)
    except _PEER_ERRORS as error:
        if not steps.multi_worker:
            raise
        raise WorkerLostError(
            f"a worker of the multi-worker job stopped ({describe_lost_worker(error)}); this "
            f"worker stopped at step {loop.step}. Relaunch every worker with --resume to "
            f"continue from the last checkpoint ({run.latest_checkpoint()})."
        ) from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    result = TrainResult(
        model=model,
        step=loop.step,
        epoch=int(state.epoch.numpy()),
        stopped_by=stopped_by,
        checkpoint=loop.last_checkpoint if chief else run.latest_checkpoint(),
        history=history,
    )
    if not chief:
        return result
    result.evaluations = [evaluation.to_dict() for evaluation in loop.evaluations]
    result.eval_seconds = sum(evaluation.seconds for evaluation in loop.evaluations)
    finished = (None, "max_steps", "max_minutes", "patience")
    if stopped_by in finished and train_config.average_last > 1:
        last = manager.checkpoints[-train_config.average_last :]
        result.averaged_checkpoint = average_checkpoints(
            last, lambda: build_model(model_config), run.averaged_path
        )
        result.eval_seconds += _offer_average(
            loop, run, model_config, result.averaged_checkpoint, len(last), progress
        )
    result.best_checkpoint = run.latest_checkpoint("best")
    return result


def _offer_average(
    loop: EpochLoop, run: RunDir, model_config, checkpoint: str, count: int, progress: bool
) -> float:
    """Scores the averaged checkpoint with the validation hook, which keeps it as
    `checkpoints/best` when it beats the best so far (it often does); returns the seconds."""
    offer = getattr(loop.validate, "offer", None)
    if offer is None:
        return 0.0
    averaged = build_model(model_config)
    model_checkpoint(averaged).restore(checkpoint).expect_partial()
    source = f"averaged last {count}"
    with loop.val_writer.as_default():
        evaluation = offer(averaged, loop.step, source)
    loop.val_writer.flush()
    if progress:
        kept = (run.best_record() or {}).get("source") == source
        kept = "kept as the best" if kept else "not kept"
        tqdm.write(
            f"averaged last {count}: BLEU {evaluation.bleu:.1f} chrF "
            f"{evaluation.chrf:.1f} ({kept}; best {evaluation.best_bleu:.1f})"
        )
    return evaluation.seconds
