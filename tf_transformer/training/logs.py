"""What training logs: TensorBoard scalars, the custom loop's progress bar and `on_step`.

TensorBoard scalars go through TensorBoard's own `tf.summary` API (the `tensorboard` package):
the training loop opens one `tf.summary.create_file_writer` per folder (`logs/train`,
`logs/validation`, `file_writer`) and writes inside `with writer.as_default():`; `model.fit`
runs use `tf.keras.callbacks.TensorBoard` (see `tf_transformer.training.fit.model_fit`) and
Keras' progress bar. View both with `tensorboard --logdir runs/`. The loop's steps return token
sums (see `TrainStep`), from which the callbacks here log token means and the token rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import tensorflow as tf
from tqdm.auto import tqdm

from tf_transformer.training.policies.progress import Policy, Progress


def write_scalar(name: str, value: float, step: int) -> None:
    """Writes one scalar to the default `tf.summary` writer with `tf.summary.scalar`."""
    tf.summary.scalar(name, value, step=step)


def file_writer(log_dir, *, chief: bool = True):
    """A `tf.summary` file writer for `log_dir`; a no-op writer on a worker other than the chief
    (only the chief writes the run directory)."""
    if not chief:
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(str(log_dir))


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


class TrainSummaries(Policy):
    """Every `log_every` steps, the interval's loss, accuracy, tokens, token rate and learning
    rate to `train_writer`; at each epoch end the validation loss and accuracy to `val_writer`
    (and a line, when `verbose`).

    Args:
      progress: the run's progress.
      optimizer: its learning rate is logged.
      log_every: steps between train scalars.
      train_writer, val_writer: `logs/train` and `logs/validation`.
      verbose: print the epoch's validation line.
    """

    def __init__(
        self,
        *,
        progress: Progress,
        optimizer,
        log_every: int,
        train_writer,
        val_writer,
        verbose: bool = False,
    ):
        super().__init__(progress=progress)
        self.optimizer = optimizer
        self.log_every = log_every
        self.train_writer = train_writer
        self.val_writer = val_writer
        self.verbose = verbose
        self.interval = Totals()

    def on_train_begin(self, logs=None):
        self.interval = Totals()

    def on_train_batch_end(self, batch, logs=None):
        self.interval.add(logs)
        step = self.progress.step
        if step % self.log_every:
            return
        with self.train_writer.as_default():
            for name, value in Totals.of(self.interval.sums).items():
                write_scalar(name, value, step)
            write_scalar("learning_rate", float(self.optimizer.learning_rate), step)
            write_scalar("tokens_per_second", self.interval.tokens_per_second(), step)
        self.interval = Totals()

    def on_epoch_end(self, epoch, logs=None):
        metrics = {name[4:]: value for name, value in (logs or {}).items() if name[:4] == "val_"}
        if not metrics:
            return
        with self.val_writer.as_default():
            for name, value in metrics.items():
                write_scalar(name, value, self.progress.step)
        if self.verbose:
            tqdm.write(
                f"epoch {epoch + 1}: val_loss {metrics['loss']:.4f} "
                f"val_accuracy {metrics['accuracy']:.4f}"
            )


class ProgressBar(Policy):
    """A tqdm bar per epoch: batches, with the epoch's running loss, accuracy and token rate.

    Args:
      progress: the run's progress.
      epochs: the run's epochs, if it counts them.
      group_size: batches per step.
    """

    def __init__(self, *, progress: Progress, epochs: int | None, group_size: int):
        super().__init__(progress=progress)
        self.epochs = epochs
        self.group_size = group_size
        self.bar = None
        self.totals = Totals()

    def on_epoch_begin(self, epoch, logs=None):
        self.bar = tqdm(
            desc=f"epoch {epoch + 1}" + (f"/{self.epochs}" if self.epochs else ""),
            initial=self.progress.position,
            unit="batch",
            dynamic_ncols=True,
        )
        self.totals = Totals()

    def on_train_batch_end(self, batch, logs=None):
        self.totals.add(logs)
        self.bar.update(self.group_size)
        self.bar.set_postfix(self.totals.postfix(), refresh=False)

    def on_epoch_end(self, epoch, logs=None):
        self.bar.close()

    def on_train_end(self, logs=None):
        if self.bar is not None:
            self.bar.close()


class OnStep(tf.keras.callbacks.Callback):
    """Calls `on_step(step, {"loss", "accuracy", "tokens"})` after every step."""

    def __init__(self, *, progress: Progress, on_step: Callable[[int, dict], None]):
        super().__init__()
        self.progress = progress
        self.on_step = on_step

    def on_train_batch_end(self, batch, logs=None):
        self.on_step(self.progress.step, Totals.of(logs))
