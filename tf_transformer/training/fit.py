"""Training with `model.fit`: compile with the paper's optimizer and loss, standard callbacks."""

from __future__ import annotations

import time
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import TrainState, make_checkpoint_manager
from tf_transformer.training.distribute import get_strategy
from tf_transformer.training.loop import write_run_config
from tf_transformer.training.losses import MaskedAccuracy, MaskedSparseCrossEntropy
from tf_transformer.training.mixed_precision import build_model
from tf_transformer.training.schedule import make_optimizer


def compile_model(model: tf.keras.Model, train_config: TrainConfig) -> tf.keras.Model:
    """Compiles `model` with Adam on `WarmupSchedule`, the masked loss and masked accuracy.

    Call it inside the strategy scope the model was built in.
    """
    model.compile(
        optimizer=make_optimizer(model.d_model, train_config),
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


def fit_paths(run_dir: str | Path | RunDir) -> dict[str, Path]:
    """Where the fit callbacks write inside a run directory."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    return {
        "logs": run.logs_path / "fit",
        "model": run.root / "fit" / "model.keras",
        "backup": run.root / "fit" / "backup",
    }


def make_callbacks(
    run_dir: str | Path | RunDir,
    *,
    validation: bool = False,
    early_stopping_patience: int | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
) -> list[tf.keras.callbacks.Callback]:
    """The usual `model.fit` callbacks for a run directory.

    - `tf.keras.callbacks.TensorBoard` scalars under `logs/fit` (`train/`, `validation/`);
    - `ModelCheckpoint` of the whole model (optimizer and schedule included) to
      `fit/model.keras`, the best by `val_loss` when there is validation data;
    - `BackupAndRestore` in `fit/backup`, so an interrupted `fit` resumes at its epoch;
    - `EarlyStopping` on `val_loss` when `early_stopping_patience` is given (needs validation);
    - `StopAtStep` when `max_steps` is given, `StopAtTime` when `max_minutes` is.
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
    """
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    write_run_config(run, model_config, train_config, data)
    tf.keras.utils.set_random_seed(train_config.seed)
    strategy = strategy or get_strategy(train_config.strategy)
    with strategy.scope():
        model = compile_model(build_model(model_config, train_config.mixed_precision), train_config)
    dataset = train_ds(0) if callable(train_ds) else train_ds
    callbacks = make_callbacks(
        run,
        validation=val_ds is not None,
        early_stopping_patience=early_stopping_patience,
        max_steps=train_config.max_steps,
        max_minutes=train_config.max_minutes,
    )
    history = model.fit(
        dataset,
        validation_data=val_ds,
        # epochs=None: the step or time limit ends `fit` (a callback sets stop_training).
        epochs=train_config.epochs or _UNBOUNDED_EPOCHS,
        callbacks=callbacks,
        verbose=verbose,
    )
    state = TrainState()
    state.step.assign(int(model.optimizer.iterations.numpy()))
    state.epoch.assign(len(history.epoch))
    manager = make_checkpoint_manager(
        run.checkpoints_path, model=model, optimizer=model.optimizer, state=state
    )
    manager.save(checkpoint_number=state.step)
    return model, history
