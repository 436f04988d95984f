"""The custom training loop: checkpoints with data position, resume, stop on signal, logging."""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.errors import TransformerError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.budget import Budget
from tf_transformer.training.checkpoints import (
    StopSignal,
    TrainState,
    average_checkpoints,
    make_checkpoint_manager,
)
from tf_transformer.training.distribute import describe_lost_worker, get_strategy, is_chief
from tf_transformer.training.mixed_precision import build_model
from tf_transformer.training.schedule import find_cooldown, make_optimizer
from tf_transformer.training.summaries import write_scalar
from tf_transformer.training.train_step import TrainStep
from tf_transformer.weights import model_checkpoint

if TYPE_CHECKING:
    from tf_transformer.training.validation import Evaluation

# A dataset of batches, or a function of the epoch returning that epoch's batches (the
# deterministic way to reshuffle: a resumed run rebuilds epoch k's order exactly; see
# `tf_transformer.training.runner.epoch_batches`).
Batches = tf.data.Dataset | Callable[[int], tf.data.Dataset]
# The validation hook: `(model, step) -> Evaluation`, e.g. a `training.validation.Validator`.
Validate = Callable[[tf.keras.Model, int], "Evaluation"]


class NonFiniteLossError(FloatingPointError, TransformerError):
    """The loss became NaN or infinite; the run stopped without saving that state."""


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


def _as_int64(inputs, tgt_out):
    src, tgt_in = inputs
    return (tf.cast(src, tf.int64), tf.cast(tgt_in, tf.int64)), tf.cast(tgt_out, tf.int64)


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
    latest = run.latest_checkpoint()
    if latest:
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
    steps = TrainStep(
        model,
        optimizer,
        label_smoothing=train_config.label_smoothing,
        strategy=strategy,
        accumulate_steps=train_config.accumulate_steps,
    )
    loop = _Loop(run, train_config, steps, state, manager, progress, on_step, started, chief)
    loop.last_checkpoint = latest
    loop.validate = validate if train_config.eval_every else None
    try:
        with StopSignal() as stop:
            result = loop.run(train_ds, val_ds, stop)
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
    if not chief:
        result.checkpoint = run.latest_checkpoint()
        return result
    result.evaluations = [evaluation.to_dict() for evaluation in loop.evaluations]
    result.eval_seconds = sum(evaluation.seconds for evaluation in loop.evaluations)
    result.best_checkpoint = run.latest_checkpoint("best")
    finished = (None, "max_steps", "max_minutes", "patience")
    if result.stopped_by in finished and train_config.average_last > 1:
        last = manager.checkpoints[-train_config.average_last :]
        result.averaged_checkpoint = average_checkpoints(
            last,
            lambda: build_model(model_config),
            run.averaged_path,
        )
        offer = getattr(loop.validate, "offer", None)
        if offer is not None:  # the average competes for checkpoints/best (it often wins)
            averaged = build_model(model_config)
            model_checkpoint(averaged).restore(result.averaged_checkpoint).expect_partial()
            source = f"averaged last {len(last)}"
            with loop.val_writer.as_default():
                evaluation = offer(averaged, loop.step, source)
            loop.val_writer.flush()
            result.eval_seconds += evaluation.seconds
            result.best_checkpoint = run.latest_checkpoint("best")
            if progress:
                kept = (run.best_record() or {}).get("source") == source
                kept = "kept as the best" if kept else "not kept"
                tqdm.write(
                    f"averaged last {len(last)}: BLEU {evaluation.bleu:.1f} chrF "
                    f"{evaluation.chrf:.1f} ({kept}; best {evaluation.best_bleu:.1f})"
                )
    return result


class _Loop:
    """The epoch/step loop of `train`, with its logging and checkpointing."""

    def __init__(
        self, run, train_config, steps, state, manager, progress, on_step, started, chief=True
    ):
        self.config = train_config
        minutes = train_config.max_minutes
        self.deadline = None if minutes is None else started + 60.0 * minutes
        self.steps = steps
        self.state = state
        self.manager = manager
        self.progress = progress
        self.on_step = on_step
        self.chief = chief  # writes the run directory; runs the validation hook
        if chief:
            self.train_writer = tf.summary.create_file_writer(str(run.logs_path / "train"))
            self.val_writer = tf.summary.create_file_writer(str(run.logs_path / "validation"))
        else:
            self.train_writer = self.val_writer = tf.summary.create_noop_writer()
        self.last_checkpoint = manager.latest_checkpoint
        self.budget = Budget(train_config.max_steps, minutes, train_config.epochs, started)
        self.cooldown = find_cooldown(steps.optimizer)
        self.batches_per_epoch: int | None = None  # counted at the first epoch end
        self.validate: Validate | None = None
        self.evaluations: list[Evaluation] = []

    @property
    def step(self) -> int:
        return int(self.state.step.numpy())

    def save(self) -> None:
        self.last_checkpoint = self.manager.save(checkpoint_number=self.state.step)

    def done(self) -> bool:
        max_steps = self.config.max_steps
        return max_steps is not None and self.step >= max_steps

    def all_epochs_done(self) -> bool:
        epochs = self.config.epochs
        return epochs is not None and int(self.state.epoch.numpy()) >= epochs

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def stop_reason(self, stop: StopSignal, *, step_done: bool = True) -> str | None:
        """Why to stop after this step, agreed by every worker; None to go on."""
        local = stop.requested or self.out_of_time()
        if not self.steps.any_worker(local) and not (step_done and self.done()):
            return None
        if stop.requested:
            return stop.requested
        if step_done and self.done():
            return "max_steps"
        return "max_minutes" if self.out_of_time() else "another worker"

    def run(self, train_ds: Batches, val_ds, stop: StopSignal) -> TrainResult:
        history = []
        stopped_by = "max_steps" if self.done() else None
        while stopped_by is None and not self.all_epochs_done():
            stopped_by = self.run_epoch(train_ds, stop)
            if stopped_by is None:
                history.append(self.end_epoch(val_ds))
        return TrainResult(
            model=self.steps.model,
            step=self.step,
            epoch=int(self.state.epoch.numpy()),
            stopped_by=stopped_by,
            checkpoint=self.last_checkpoint,
            history=history,
        )

    def run_epoch(self, train_ds: Batches, stop: StopSignal) -> str | None:
        """Trains the rest of the current epoch; returns why it stopped early, or None."""
        epoch = int(self.state.epoch.numpy())
        position = int(self.state.position.numpy())
        dataset = train_ds(epoch) if callable(train_ds) else train_ds
        # `position` counts the batches of the epoch's sequence already trained on.
        dataset = dataset.map(_as_int64).skip(position)
        bar = tqdm(
            desc=f"epoch {epoch + 1}" + (f"/{self.config.epochs}" if self.config.epochs else ""),
            initial=position,
            unit="batch",
            disable=not self.progress,
            dynamic_ncols=True,
        )
        totals = _Totals()
        interval = _Totals()
        try:
            for micro_batches in self.steps.updates(dataset):
                self.cool_down()
                sums = {
                    key: float(value) for key, value in self.steps.update(micro_batches).items()
                }
                if not math.isfinite(sums["loss_sum"]):
                    raise NonFiniteLossError(
                        f"the loss became {sums['loss_sum']} at step {self.step + 1} (epoch "
                        f"{epoch + 1}); stopped without saving. The last good checkpoint is "
                        f"{self.last_checkpoint}. Lower the learning rate (--warmup-steps) "
                        "or train in float32."
                    )
                self.state.step.assign_add(1)
                self.state.position.assign_add(self.steps.group_size)
                totals.add(sums)
                interval.add(sums)
                bar.update(self.steps.group_size)
                bar.set_postfix(totals.postfix(), refresh=False)
                if self.on_step is not None:
                    self.on_step(self.step, _Totals.of(sums))
                if self.step % self.config.log_every == 0:
                    self.log_train(interval)
                    interval = _Totals()
                reason = self.stop_reason(stop)
                if reason is not None:
                    self.save()
                    if reason == "max_steps" and self.eval_due():
                        self.evaluate()  # the last step is a scheduled evaluation
                    return reason
                if self.step % self.config.checkpoint_every == 0 or self.eval_due():
                    self.save()
                if self.eval_due():
                    if self.evaluate():
                        return "patience"
                    # The evaluation may have spent the rest of the budget.
                    reason = self.stop_reason(stop, step_done=False)
                    if reason is not None:
                        return reason
        finally:
            bar.close()
        return stop.requested

    def cool_down(self) -> None:
        """Tells the learning-rate cooldown how much of the budget is left (every worker the
        same number: their clocks differ)."""
        if self.cooldown is None:
            return
        left = self.budget.left(
            self.step,
            epoch=int(self.state.epoch.numpy()),
            position=int(self.state.position.numpy()),
            batches_per_epoch=self.batches_per_epoch,
        )
        self.cooldown.set_left(self.steps.mean_over_workers(left))

    def eval_due(self) -> bool:
        return self.validate is not None and self.step % self.config.eval_every == 0

    def evaluate(self) -> bool:
        """Runs the validation hook on the current weights; True when it says stop.

        In a multi-worker job only the chief evaluates; the others wait for its verdict.
        """
        if not self.chief:
            return self.steps.any_worker(False)
        with self.val_writer.as_default():
            evaluation = self.validate(self.steps.model, self.step)
        self.val_writer.flush()
        self.evaluations.append(evaluation)
        if self.progress:
            tqdm.write(evaluation.line())
        return self.steps.any_worker(evaluation.stop)

    def end_epoch(self, val_ds) -> dict:
        self.batches_per_epoch = int(self.state.position.numpy())
        self.state.epoch.assign_add(1)
        self.state.position.assign(0)
        self.save()
        record = {"epoch": int(self.state.epoch.numpy()), "step": self.step}
        if val_ds is not None:
            metrics = self.steps.evaluate(val_ds.map(_as_int64))
            with self.val_writer.as_default():
                for name, value in metrics.items():
                    write_scalar(name, value, self.step)
            record.update({f"val_{name}": value for name, value in metrics.items()})
            if self.progress:
                tqdm.write(
                    f"epoch {record['epoch']}: val_loss {metrics['loss']:.4f} "
                    f"val_accuracy {metrics['accuracy']:.4f}"
                )
        return record

    def log_train(self, interval: _Totals) -> None:
        learning_rate = self.steps.optimizer.learning_rate
        with self.train_writer.as_default():
            for name, value in _Totals.of(interval.sums).items():
                write_scalar(name, value, self.step)
            write_scalar("learning_rate", float(learning_rate), self.step)
            write_scalar("tokens_per_second", interval.tokens_per_second(), self.step)


class _Totals:
    """Running sums of step outputs over an interval, with its wall time."""

    def __init__(self):
        self.sums = {"loss_sum": 0.0, "correct": 0.0, "tokens": 0.0}
        self.start = time.perf_counter()

    def add(self, sums: dict) -> None:
        for key in self.sums:
            self.sums[key] += sums[key]

    @staticmethod
    def of(sums: dict) -> dict:
        tokens = max(sums["tokens"], 1.0)
        return {
            "loss": sums["loss_sum"] / tokens,
            "accuracy": sums["correct"] / tokens,
            "tokens": sums["tokens"],
        }

    def tokens_per_second(self) -> float:
        return self.sums["tokens"] / max(time.perf_counter() - self.start, 1e-9)

    def postfix(self) -> dict:
        means = self.of(self.sums)
        return {
            "loss": f"{means['loss']:.3f}",
            "acc": f"{means['accuracy']:.3f}",
            "tok/s": f"{self.tokens_per_second():.0f}",
        }
