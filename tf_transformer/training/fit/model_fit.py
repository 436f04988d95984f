"""Training with `model.fit`: the paper's optimizer and loss, the run's policies as callbacks.

`fit` trains with Keras' own step and loop, and with the same policies as the custom loop
(`training.policies`: stopping, cooldown, checkpoints, dev BLEU every `eval_every` steps with
`checkpoints/best/` and patience, averaging), beside Keras' `TensorBoard`, `ModelCheckpoint`
and `BackupAndRestore`. Its optimizer (Keras' gradient accumulation) is in `training.fit.optimizer`.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import ModelConfig, TrainConfig
from tf_transformer.data.mix import count_elements
from tf_transformer.errors import InvalidValueError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import restore_newest
from tf_transformer.training.distribute import Workers, distribute_batches, num_workers
from tf_transformer.training.fit.backup import BackupAndRestore, ModelCheckpoint
from tf_transformer.training.fit.data_epoch import EpochStart, fit_dataset
from tf_transformer.training.fit.optimizer import fit_optimizer
from tf_transformer.training.policies.progress import FitProgress, Progress
from tf_transformer.training.policies.standard import NonFiniteLossError
from tf_transformer.training.policies.validate_every import Validate
from tf_transformer.training.result import TrainResult
from tf_transformer.training.session import Session
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.losses import MaskedAccuracy, MaskedSparseCrossEntropy


def compile_model(model: tf.keras.Model, train_config: TrainConfig) -> tf.keras.Model:
    """Compiles `model` with Adam on `WarmupSchedule`, the masked loss and masked accuracy.

    Call it inside the strategy scope the model was built in.
    """
    model.compile(
        optimizer=fit_optimizer(model.config.d_model, train_config),
        loss=MaskedSparseCrossEntropy(label_smoothing=train_config.label_smoothing),
        metrics=[MaskedAccuracy()],
    )
    return model


_UNBOUNDED_EPOCHS = 1_000_000


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
    restore: Callable[[], str | None] = lambda: None,
) -> list[tf.keras.callbacks.Callback]:
    """Keras' own `model.fit` callbacks for a run directory (the run's policies come beside
    them, see `training.policies`).

    - `tf.keras.callbacks.TensorBoard` scalars under `logs/fit` (`train/`, `validation/`);
    - `ModelCheckpoint` (written whole or not at all, see `fit_backup`) of the whole model (optimizer and schedule included) to
      `fit/model.keras`, the best by `val_loss` when there is validation data;
    - `BackupAndRestore` in `fit/backup`, so an interrupted `fit` resumes at its epoch; when
      the backup is torn, `restore()` restores the checkpoint to resume from instead (see
      `training.fit.backup`);
    - `EarlyStopping` on `val_loss` when `early_stopping_patience` is given (needs validation).
    """
    paths = fit_paths(run_dir)
    paths["model"].parent.mkdir(parents=True, exist_ok=True)
    callbacks = [
        tf.keras.callbacks.TensorBoard(log_dir=str(paths["logs"])),
        ModelCheckpoint(
            str(paths["model"]),
            monitor="val_loss" if validation else "loss",
            save_best_only=validation,
        ),
        BackupAndRestore(str(paths["backup"]), restore),
    ]
    if early_stopping_patience is not None:
        if not validation:
            raise InvalidValueError("early stopping needs validation data.")
        callbacks.append(
            tf.keras.callbacks.EarlyStopping(
                monitor="val_loss", patience=early_stopping_patience, restore_best_weights=True
            )
        )
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
    workers: Workers | None = None,
    early_stopping_patience: int | None = None,
    validate: Validate | None = None,
    on_epoch_begin: Callable[[int], None] | None = None,
    verbose: int | str = "auto",
) -> TrainResult:
    """Trains with `model.fit` and leaves a run directory like the custom loop's.

    The run's policies are the custom loop's (see `training.loop.train`): checkpoints in
    `checkpoints/` every `checkpoint_every` steps, at each epoch end and at the end (so
    `RunDir.load_model` reads a fitted run like any other); `max_steps`, `max_minutes`,
    `epochs` and SIGINT/SIGTERM stop it; the cooldown; with `validate` and `eval_every`, dev
    BLEU every `eval_every` steps into `logs/validation`, the best weights in
    `checkpoints/best/` and `patience`; `average_last`. A NaN or infinite loss raises
    `NonFiniteLossError` before anything saves that step.

    It resumes from the run's newest whole checkpoint (torn ones passed over, as in the
    custom loop), at the start of that checkpoint's epoch; Keras' backup of a killed `fit`
    replaces it when the backup is whole (see `training.fit.backup`).

    Under a multi-replica strategy each replica trains whole batches of its own (see
    `tf_transformer.training.distribute`). Under a multi-worker one only the chief writes the
    run directory; the other workers' callbacks write into a temporary directory, removed at
    the end, that starts from a copy of the chief's `fit/backup` (so `BackupAndRestore`
    resumes every worker at the same epoch).

    Args:
      run_dir: the run directory.
      model_config: the model, with the real vocabulary sizes.
      train_config: epochs, max_steps, optimizer, loss and precision settings (a
        `mixed_precision` of "auto" is resolved as in the custom loop, `Session.open`).
      train_ds: batches `((src, tgt_in), tgt_out)`, or `epoch -> batches` (epoch 0's is
        used, so give it a reshuffling dataset), or an `EpochBatches`: its `each_pass` dataset
        of an epoch variable, set at each epoch's start, so each epoch draws its mix anew.
      val_ds: validation batches.
      data: what the run trains on (`DataConfig.to_dict()`), recorded in config.json.
      strategy: overrides `train_config.strategy`.
      workers: who trains and who is the chief (`training.run` decides it once); overrides
        `strategy`.
      early_stopping_patience: epochs without `val_loss` improvement before stopping.
      validate: the validation hook, called every `train_config.eval_every` steps.
      on_epoch_begin: called with each epoch at its start (e.g. to log its mix).
      verbose: `model.fit`'s verbosity.

    Returns:
      A `TrainResult`; its `history` holds `fit`'s per-epoch logs.

    Raises:
      NonFiniteLossError: the loss became NaN/inf; the checkpoint whose weights gave it and the
        backup are removed, so the latest checkpoint is one that gave a finite loss.
      WorkerLostError: another worker of a multi-worker job stopped.
    """
    session = Session.open(
        RunDir.of(run_dir),
        model_config,
        train_config,
        data,
        strategy,
        workers,
        verbose=verbose != 0,
    )
    run, strategy, chief = session.run, session.strategy, session.chief
    train_config = session.train_config  # its mixed_precision resolved ("auto")
    with strategy.scope():
        model = compile_model(build_model(model_config, train_config.mixed_precision), train_config)
        # Here, not in fit's first step: a strategy's variables cannot be made inside it.
        model.optimizer.build(model.trainable_variables)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
    dataset = fit_dataset(train_ds, epoch)
    steps_per_epoch = None
    if strategy.num_replicas_in_sync > 1:  # whole batches per replica, as in the custom loop
        # Keras takes the next batch inside its compiled step: at the end of a distributed
        # dataset that step fails after the optimizer's step counter has advanced (a step
        # without an update, which shifts the learning-rate schedule). An endless stream
        # (each pass the next epoch's draw, or reshuffled) cut into epochs of one pass's steps
        # never ends in a step.
        counted = train_ds(0) if callable(train_ds) else dataset  # keeps `dataset`'s orders
        batches = count_elements(counted)
        steps_per_epoch = max(math.ceil(batches / strategy.num_replicas_in_sync), 1)
        dataset = distribute_batches(strategy, dataset.repeat())
        val_ds = None if val_ds is None else distribute_batches(strategy, val_ds)
    writes = run
    if not chief:
        writes = RunDir(tempfile.mkdtemp(prefix="tf_transformer_worker_"))
        if fit_paths(run)["backup"].is_dir():
            shutil.copytree(fit_paths(run)["backup"], fit_paths(writes)["backup"])
    status = Progress()
    manager = session.checkpoint_manager(
        writes.checkpoints_path, model=model, optimizer=model.optimizer, state=status.state
    )
    # Keras 3 "symbolically builds" a model made under a strategy by averaging the first
    # distributed batch over the replicas, which fails when they hold batches of different
    # shapes (and across workers). Unset, `fit` finds the strategy in the scope around it
    # and builds the loss and metrics when it traces its step.
    model._distribute_strategy = None
    # The newest whole checkpoint (torn ones passed over), at the start of its epoch; Keras'
    # backup, when there is one and it is whole, replaces it in `fit` (see `training.fit.backup`).
    latest = restore_newest(manager.checkpoint, run.checkpoints_path)
    initial_epoch = status.epoch if latest else 0
    epoch.assign(initial_epoch)  # the epoch the data's first pass draws (`each_pass`)

    def restore_again() -> str | None:
        if latest:
            manager.checkpoint.restore(latest).assert_existing_objects_matched()
        return latest

    if num_workers(strategy) > 1:
        _stack_step_logs(model)

    backup = fit_paths(run)["backup"]
    try:
        with session.policies(
            status,
            manager,
            resume_from=lambda: f"the last epoch ({backup})",
            validate=validate,
            verbose=verbose != 0,
            restored=latest,
        ) as policies:
            callbacks = make_callbacks(
                writes,
                validation=val_ds is not None,
                early_stopping_patience=early_stopping_patience,
                restore=restore_again,
            )
            # After Keras' own: `BackupAndRestore` restores the step count that
            # `FitProgress` reads.
            callbacks += [
                FitProgress(progress=status),
                EpochStart(on_epoch_begin),
                *policies.callbacks(),
            ]
            with strategy.scope(), warnings.catch_warnings():
                # Keras learns an epoch's length from a dataset of unknown length (ours: the
                # bucketed batches) by running out of it at the end of the first epoch, and
                # says "Your input ran out of data; interrupting training" then; training goes
                # on. A distributed run's endless stream never runs out.
                warnings.filterwarnings("ignore", "Your input ran out of data", UserWarning)
                history = model.fit(
                    dataset,
                    validation_data=val_ds,
                    # epochs=None: the policies end `fit` (they set stop_training).
                    epochs=train_config.epochs or _UNBOUNDED_EPOCHS,
                    initial_epoch=initial_epoch,
                    steps_per_epoch=steps_per_epoch,
                    # Keras cannot shuffle a dataset (the pipeline does: `make_batches`); its
                    # default, True, only warns that it is ignored.
                    shuffle=False,
                    callbacks=callbacks,
                    verbose=verbose,
                )
    except NonFiniteLossError:
        # The backup holds the last epoch end's weights, which may be the ones that gave the
        # loss; --resume goes to the newest checkpoint that gave a finite one instead.
        shutil.rmtree(fit_paths(writes)["backup"], ignore_errors=True)
        raise
    finally:
        if not chief:
            shutil.rmtree(writes.root, ignore_errors=True)
    records = [
        {"epoch": epoch + 1, **{name: values[i] for name, values in history.history.items()}}
        for i, epoch in enumerate(history.epoch)
    ]
    return policies.result(model, records)
