"""The epoch/step loop of `train`: steps, stop reasons, checkpoints, validation, logging."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.errors import TransformerError
from tf_transformer.training.budget import Budget
from tf_transformer.training.checkpoints import StopSignal
from tf_transformer.training.schedule import find_cooldown
from tf_transformer.training.summaries import write_scalar

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


def as_int64(inputs, tgt_out):
    src, tgt_in = inputs
    return (tf.cast(src, tf.int64), tf.cast(tgt_in, tf.int64)), tf.cast(tgt_out, tf.int64)


class EpochLoop:
    """The epoch/step loop of `training.loop.train`, with its logging and checkpointing."""

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

    def run(self, train_ds: Batches, val_ds, stop: StopSignal) -> tuple[str | None, list[dict]]:
        """Trains until the budget, a signal or patience stops it, or every epoch ran.

        Returns why it stopped (None: all epochs ran) and one record per epoch finished.
        """
        history = []
        stopped_by = "max_steps" if self.done() else None
        while stopped_by is None and not self.all_epochs_done():
            stopped_by = self.run_epoch(train_ds, stop)
            if stopped_by is None:
                history.append(self.end_epoch(val_ds))
        return stopped_by, history

    def run_epoch(self, train_ds: Batches, stop: StopSignal) -> str | None:
        """Trains the rest of the current epoch; returns why it stopped early, or None."""
        epoch = int(self.state.epoch.numpy())
        position = int(self.state.position.numpy())
        dataset = train_ds(epoch) if callable(train_ds) else train_ds
        # `position` counts the batches of the epoch's sequence already trained on.
        dataset = dataset.map(as_int64).skip(position)
        bar = tqdm(
            desc=f"epoch {epoch + 1}" + (f"/{self.config.epochs}" if self.config.epochs else ""),
            initial=position,
            unit="batch",
            disable=not self.progress,
            dynamic_ncols=True,
        )
        totals = Totals()
        interval = Totals()
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
                    self.on_step(self.step, Totals.of(sums))
                if self.step % self.config.log_every == 0:
                    self.log_train(interval)
                    interval = Totals()
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
            metrics = self.steps.evaluate(val_ds.map(as_int64))
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

    def log_train(self, interval: Totals) -> None:
        learning_rate = self.steps.optimizer.learning_rate
        with self.train_writer.as_default():
            for name, value in Totals.of(interval.sums).items():
                write_scalar(name, value, self.step)
            write_scalar("learning_rate", float(learning_rate), self.step)
            write_scalar("tokens_per_second", interval.tokens_per_second(), self.step)


class Totals:
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
