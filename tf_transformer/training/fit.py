"""Training with `model.fit`: compile with the paper's optimizer and loss, standard callbacks.

Gradient accumulation (`accumulate_steps` N) uses the Keras optimizer's own
`gradient_accumulation_steps`: every fit step trains one batch per replica, and every N-th
applies the *mean* of the N batches' gradients. Each batch's loss is its own token mean, so
a batch weighs 1/N however many tokens it holds: the update is that of one batch holding the
N only when they hold equal numbers of tokens. With token-budget batches they roughly do
(a batch of long sentences holds fewer sentences), but a short last batch of a bucket counts
as much as a full one. The custom loop's accumulation is exact (a token-weighted sum, see
`TrainStep`); so is its split across replicas, where `fit` likewise averages the replicas'
token means. Keras' schedules would see micro-batches (`optimizer._iterations`), so here the
schedule is fed `iterations // N`: the learning rate and `optimizer.iterations` count updates.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.run_dir import RunDir
from tf_transformer.training.budget import Budget
from tf_transformer.training.checkpoints import TrainState, make_checkpoint_manager
from tf_transformer.training.distribute import (
    describe_lost_worker,
    distribute_batches,
    get_strategy,
    is_chief,
    num_workers,
)
from tf_transformer.training.loop import WorkerLostError, write_run_config
from tf_transformer.training.losses import MaskedAccuracy, MaskedSparseCrossEntropy
from tf_transformer.training.mixed_precision import build_model
from tf_transformer.training.schedule import find_cooldown, make_optimizer
from tf_transformer.training.train_step import dense_gradients


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DenseAdam(tf.keras.optimizers.Adam):
    """Adam that applies embedding gradients as dense tensors (see `dense_gradients`): the
    same update as the custom loop's, not one Adam moment update per token occurrence."""

    def apply(self, grads, trainable_variables=None):
        return super().apply(dense_gradients(list(grads)), trainable_variables)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class UpdateSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(step // accumulate_steps)`: a schedule of updates, fed Keras' micro-batch count.

    Args:
      schedule: a `LearningRateSchedule` of optimizer updates (e.g. `WarmupSchedule`).
      accumulate_steps: micro-batches per update (the optimizer's
        `gradient_accumulation_steps`).
    """

    def __init__(self, schedule, accumulate_steps: int):
        super().__init__()
        self.schedule = schedule
        self.accumulate_steps = int(accumulate_steps)

    def __call__(self, step):
        return self.schedule(tf.math.floordiv(step, self.accumulate_steps))

    def get_config(self) -> dict:
        return {
            "schedule": tf.keras.utils.serialize_keras_object(self.schedule),
            "accumulate_steps": self.accumulate_steps,
        }

    @classmethod
    def from_config(cls, config):
        schedule = tf.keras.utils.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["accumulate_steps"])


def fit_optimizer(d_model: int, train_config: TrainConfig) -> tf.keras.optimizers.Optimizer:
    """`make_optimizer`'s Adam as a `DenseAdam`, with Keras gradient accumulation when
    `train_config.accumulate_steps` > 1 (its schedule then counts updates)."""
    optimizer = make_optimizer(d_model, train_config)
    scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    adam = optimizer.inner_optimizer if scaled else optimizer
    config = adam.get_config()
    steps = train_config.accumulate_steps
    if steps > 1:
        config["learning_rate"] = UpdateSchedule(adam._learning_rate, steps)
        config["gradient_accumulation_steps"] = steps
    adam = DenseAdam.from_config(config)
    return tf.keras.mixed_precision.LossScaleOptimizer(adam) if scaled else adam


def compile_model(model: tf.keras.Model, train_config: TrainConfig) -> tf.keras.Model:
    """Compiles `model` with Adam on `WarmupSchedule`, the masked loss and masked accuracy.

    Call it inside the strategy scope the model was built in.
    """
    model.compile(
        optimizer=fit_optimizer(model.d_model, train_config),
        loss=MaskedSparseCrossEntropy(label_smoothing=train_config.label_smoothing),
        metrics=[MaskedAccuracy()],
    )
    return model


_UNBOUNDED_EPOCHS = 1_000_000


class StopAtStep(tf.keras.callbacks.Callback):
    """Stops `model.fit` once the optimizer has taken `max_steps` steps."""

    def __init__(self, max_steps: int):
        super().__init__()
        self.max_steps = int(max_steps)

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.max_steps:
            self.model.stop_training = True


class StopAtTime(tf.keras.callbacks.Callback):
    """Stops `model.fit` after the batch that crosses a wall-clock budget of `max_minutes`."""

    def __init__(self, max_minutes: float):
        super().__init__()
        self.deadline = time.monotonic() + 60.0 * float(max_minutes)

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() >= self.deadline:
            self.model.stop_training = True


class CoolDown(tf.keras.callbacks.Callback):
    """Before each batch, tells the optimizer's `Cooldown` schedule how much of `budget` is
    left (`fit`'s steps per epoch, when known, size its epochs)."""

    def __init__(self, budget: Budget):
        super().__init__()
        self.budget = budget
        self.cooldown = None
        self.epoch = 0

    def on_train_begin(self, logs=None):
        self.cooldown = find_cooldown(self.model.optimizer)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.cooldown is not None:
            step = int(self.model.optimizer.iterations.numpy())
            steps = self.params.get("steps")
            left = self.budget.left(step, epoch=self.epoch, position=batch, batches_per_epoch=steps)
            self.cooldown.set_left(left)


def fit_paths(run_dir: str | Path | RunDir) -> dict[str, Path]:
    """Where the fit callbacks write inside a run directory."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    return {
        "logs": run.logs_path / "fit",
        "model": run.root / "fit" / "model.keras",
        "backup": run.root / "fit" / "backup",
    }


def _stack_step_logs(model: tf.keras.Model) -> None:
    """Gives each of `model`'s fit/evaluate step logs a leading axis of 1.

    Keras 3 averages a step's logs over the workers of a `MultiWorkerMirroredStrategy` with
    `strategy.reduce("MEAN", value, axis=0)`, which fails on scalar metrics ("Invalid
    reduction dimension 0 for input with 0 dimensions", keras-team/keras#20585). With the
    axis, the mean over it is the mean over the replicas, a scalar again.
    """
    train_step, test_step = model.train_step, model.test_step

    def stacked(logs):
        return tf.nest.map_structure(lambda value: value[tf.newaxis], logs)

    model.train_step = lambda data: stacked(train_step(data))
    model.test_step = lambda data: stacked(test_step(data))


def make_callbacks(
    run_dir: str | Path | RunDir,
    *,
    validation: bool = False,
    early_stopping_patience: int | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
    cooldown_epochs: int | None = None,
) -> list[tf.keras.callbacks.Callback]:
    """The usual `model.fit` callbacks for a run directory.

    - `tf.keras.callbacks.TensorBoard` scalars under `logs/fit` (`train/`, `validation/`);
    - `ModelCheckpoint` of the whole model (optimizer and schedule included) to
      `fit/model.keras`, the best by `val_loss` when there is validation data;
    - `BackupAndRestore` in `fit/backup`, so an interrupted `fit` resumes at its epoch;
    - `EarlyStopping` on `val_loss` when `early_stopping_patience` is given (needs validation);
    - `StopAtStep` when `max_steps` is given, `StopAtTime` when `max_minutes` is;
    - `CoolDown` (it acts only on an optimizer with a `Cooldown` schedule) over the budget of
      `max_steps`, `max_minutes` and `cooldown_epochs`.
    """
    paths = fit_paths(run_dir)
    paths["model"].parent.mkdir(parents=True, exist_ok=True)
    callbacks = [
        tf.keras.callbacks.TensorBoard(log_dir=str(paths["logs"])),
        tf.keras.callbacks.ModelCheckpoint(
            str(paths["model"]),
            monitor="val_loss" if validation else "loss",
            save_best_only=validation,
        ),
        tf.keras.callbacks.BackupAndRestore(str(paths["backup"])),
    ]
    if early_stopping_patience is not None:
        if not validation:
            raise ValueError("early stopping needs validation data.")
        callbacks.append(
            tf.keras.callbacks.EarlyStopping(
                monitor="val_loss", patience=early_stopping_patience, restore_best_weights=True
            )
        )
    if max_steps is not None:
        callbacks.append(StopAtStep(max_steps))
    if max_minutes is not None:
        callbacks.append(StopAtTime(max_minutes))
    budget = Budget(max_steps, max_minutes, cooldown_epochs)
    if budget.bounded:
        callbacks.append(CoolDown(budget))
    return callbacks


def fit(
    run_dir: str | Path | RunDir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    train_ds,
    val_ds: tf.data.Dataset | None = None,
    *,
    data: dict | None = None,
    strategy: tf.distribute.Strategy | None = None,
    early_stopping_patience: int | None = None,
    verbose: int | str = "auto",
):
    """Trains with `model.fit` and leaves a run directory like the custom loop's.

    After fitting, the model and optimizer are also saved as a `checkpoints/` checkpoint, so
    `RunDir.load_model` (translate, evaluate, export) reads a fitted run like any other.

    Under a multi-replica strategy each replica trains whole batches of its own (see
    `tf_transformer.training.distribute`). Under a multi-worker one only the chief writes the
    run directory; the other workers' callbacks write into a temporary directory, removed at
    the end, that starts from a copy of the chief's `fit/backup` (so `BackupAndRestore`
    resumes every worker at the same epoch).

    Args:
      run_dir: the run directory.
      model_config: the model, with the real vocabulary sizes.
      train_config: epochs, max_steps, optimizer, loss and precision settings.
      train_ds: batches `((src, tgt_in), tgt_out)` (or `epoch -> batches`; epoch 0's is used,
        so give it a reshuffling dataset).
      val_ds: validation batches.
      data: what the run trains on (`DataConfig.to_dict()`), recorded in config.json.
      strategy: overrides `train_config.strategy`.
      early_stopping_patience: epochs without `val_loss` improvement before stopping.
      verbose: `model.fit`'s verbosity.

    Returns:
      `(model, history)`.

    Raises:
      WorkerLostError: another worker of a multi-worker job stopped.
    """
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    strategy = strategy or get_strategy(train_config.strategy)
    chief = is_chief(strategy)
    if chief:
        write_run_config(run, model_config, train_config, data)
    tf.keras.utils.set_random_seed(train_config.seed)
    with strategy.scope():
        model = compile_model(build_model(model_config, train_config.mixed_precision), train_config)
        # Here, not in fit's first step: a strategy's variables cannot be made inside it.
        model.optimizer.build(model.trainable_variables)
    dataset = train_ds(0) if callable(train_ds) else train_ds
    steps_per_epoch = None
    if strategy.num_replicas_in_sync > 1:  # whole batches per replica, as in the custom loop
        # Keras takes the next batch inside its compiled step: at the end of a distributed
        # dataset that step fails after the optimizer's step counter has advanced (a step
        # without an update, which shifts the learning-rate schedule). An endless stream
        # (reshuffled at each pass) cut into epochs of one pass's steps never ends in a step.
        counted = train_ds(0) if callable(train_ds) else dataset  # keeps `dataset`'s orders
        batches = int(counted.reduce(0, lambda count, _: count + 1))
        steps_per_epoch = max(math.ceil(batches / strategy.num_replicas_in_sync), 1)
        dataset = distribute_batches(strategy, dataset.repeat())
        val_ds = None if val_ds is None else distribute_batches(strategy, val_ds)
    writes = run
    if not chief:
        writes = RunDir(tempfile.mkdtemp(prefix="tf_transformer_worker_"))
        if fit_paths(run)["backup"].is_dir():
            shutil.copytree(fit_paths(run)["backup"], fit_paths(writes)["backup"])
    callbacks = make_callbacks(
        writes,
        validation=val_ds is not None,
        early_stopping_patience=early_stopping_patience,
        max_steps=train_config.max_steps,
        max_minutes=train_config.max_minutes,
        cooldown_epochs=train_config.epochs,
    )
    # Keras 3 "symbolically builds" a model made under a strategy by averaging the first
    # distributed batch over the replicas, which fails when they hold batches of different
    # shapes (and across workers). Unset, `fit` finds the strategy in the scope around it
    # and builds the loss and metrics when it traces its step.
    model._distribute_strategy = None
    if num_workers(strategy) > 1:
        _stack_step_logs(model)
    try:
        with strategy.scope():
            history = model.fit(
                dataset,
                validation_data=val_ds,
                # epochs=None: the step or time limit ends `fit` (a callback sets stop_training).
                epochs=train_config.epochs or _UNBOUNDED_EPOCHS,
                steps_per_epoch=steps_per_epoch,
                callbacks=callbacks,
                verbose=verbose,
            )
        state = TrainState()
        state.step.assign(int(model.optimizer.iterations.numpy()))
        state.epoch.assign(len(history.epoch))
        manager = make_checkpoint_manager(
            writes.checkpoints_path, model=model, optimizer=model.optimizer, state=state
        )
        manager.save(checkpoint_number=state.step)
    except (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError) as error:
        if num_workers(strategy) == 1:
            raise
        raise WorkerLostError(
            f"a worker of the multi-worker job stopped ({describe_lost_worker(error)}); "
            "relaunch every worker with --resume to continue from the last epoch "
            f"({fit_paths(run)['backup']})."
        ) from None
    finally:
        if not chief:
            shutil.rmtree(writes.root, ignore_errors=True)
    return model, history
