"""`run`: the one entry point that owns a training run, from data to the last checkpoint.

The CLI (`tf-transformer train`), `make demo`, the notebooks and `bench/quality.py` all train
through it. It loads the data, builds the tokenizers (or reloads a run's), builds the batches
once, and hands them to the custom loop or to `model.fit`, which record config.json and resume
from the run's checkpoints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import DataConfig, ModelConfig, TrainConfig
from tf_transformer.data.dev_sets import load_dev_sets
from tf_transformer.data.mix import Mix
from tf_transformer.errors import InvalidValueError
from tf_transformer.run_dir import RunDir
from tf_transformer.training.distribute import Workers, strategy_for
from tf_transformer.training.loop import TrainResult, train
from tf_transformer.training.start.inputs import (
    MixLog,
    check_shared_embeddings,
    epoch_batches,
    prepare_tokenizers,
    validation_batches,
)
from tf_transformer.training.start.lock import RunLock, clear_run_dir
from tf_transformer.training.start.resume import apply_train_changes, resumed_configs


def run(
    run_dir: str | Path | RunDir,
    data: DataConfig | None = None,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    fit: bool = False,
    overwrite: bool = False,
    train_changes: dict | None = None,
    train_pairs: tf.data.Dataset | None = None,
    validation_pairs: tf.data.Dataset | None = None,
    strategy: tf.distribute.Strategy | None = None,
    progress: bool = True,
    on_step: Callable[[int, dict], None] | None = None,
) -> TrainResult:
    """Trains a Transformer in `run_dir`, or resumes the run that is there.

    A new run learns WordPiece tokenizers from the training split, sets the model's vocabulary
    sizes from them and trains. A run directory that already has a config.json is resumed (unless
    `overwrite`): its tokenizers, model and training configurations and data are used (`data`
    may say where the same corpus lives now), and the checkpoints carry on from the last one.
    A resume may change only the limits and how the run runs (`training.start.resume.RESUMABLE`,
    e.g. a higher `max_steps`); a `model_config` or `train_config` that differs otherwise is
    refused. The custom loop and `model.fit` share everything but the step itself.

    Args:
      run_dir: the run directory (see `tf_transformer.run_dir`).
      data: which corpus and language pair (default: the run's, else `DataConfig()`).
      model_config: the model of a new run (vocabulary sizes are filled in).
      train_config: optimizer, batching and loop settings (default: the run's, else the
        defaults).
      fit: train with `model.fit` instead of the custom loop.
      overwrite: delete what `run_dir` holds and start over; done only once the data has
        loaded, so a corpus that fails to load leaves the old run as it was.
      train_changes: `TrainConfig` fields to change (e.g. the limits of a resumed run); a
        `max_steps` without `epochs` lifts the epoch limit (`training.start.resume`).
      train_pairs, validation_pairs: `(source, target)` string pairs to use instead of loading
        `data`'s training corpora and dev sets (e.g. a subset); `data` still names the
        languages and is recorded.
      strategy: a `tf.distribute` strategy (default: `train_config.strategy`).
      progress: progress bars.
      on_step: custom loop only: called after every step with `(step, metrics)`.

    With `train_config.eval_every`, the first `eval_sentences` validation
    pairs are translated greedily every `eval_every` steps: dev BLEU and chrF and sample
    translations go to `logs/validation`, the best weights to `checkpoints/best/`, and
    `patience` evaluations without a better BLEU stop the run (see `training.validation`).

    Returns:
      A `TrainResult` (for `fit` too: `history` holds its per-epoch logs).

    Raises:
      ValueError: the run holds checkpoints of another model configuration, or bad settings.
      tf_transformer data errors: the corpus cannot be read (one clear message).
      RunLockedError: another process is training `run_dir` (see `RunLock`).
      WriteError: a file of the run could not be written (a full disk); the previous
        checkpoint and files are intact.
    """
    run = RunDir.of(run_dir)
    stored = run.read_config() if run.exists() and not overwrite else {}
    if data is None:
        data = DataConfig.from_dict(stored["data"]) if stored.get("data") else DataConfig()
    if stored.get("model"):  # a resumed run: its configs, with what a resume may change
        model_config, train_config = resumed_configs(
            run.model_config(),
            run.train_config(),
            model_config=model_config,
            train_config=train_config,
            train_changes=train_changes,
        )
    else:
        train_config = apply_train_changes(train_config or TrainConfig(), train_changes)
    if fit and train_config.shard_data:
        raise InvalidValueError(
            "shard_data (--shard-data) trains with the custom loop only: drop --fit, or "
            "--shard-data (every worker then reads the whole epoch)."
        )
    if not stored.get("model") and model_config is not None and not train_config.shared_vocab:
        check_shared_embeddings(model_config)  # before the data loads
    # A multi-worker strategy configures its collectives when it is made, before TensorFlow
    # runs anything (so before the data loads). Whether this process is the chief (it alone
    # writes the run directory, and holds its lock) is decided here, once, for the whole call.
    workers = Workers(strategy or strategy_for(train_config))
    with RunLock(run.root) if workers.chief else contextlib.nullcontext():
        return _train_run(
            run,
            stored,
            data,
            model_config,
            train_config,
            workers,
            fit=fit,
            overwrite=overwrite,
            train_pairs=train_pairs,
            validation_pairs=validation_pairs,
            progress=progress,
            on_step=on_step,
        )


def _train_run(
    run: RunDir,
    stored: dict,
    data: DataConfig,
    model_config: ModelConfig | None,
    train_config: TrainConfig,
    workers: Workers,
    *,
    fit: bool,
    overwrite: bool,
    train_pairs: tf.data.Dataset | None,
    validation_pairs: tf.data.Dataset | None,
    progress: bool,
    on_step: Callable[[int, dict], None] | None,
) -> TrainResult:
    """`run` past its boundary: the run resolved, its configs settled, the chief decided and
    holding the lock."""
    chief = workers.chief
    had_tokenizers = run.tokenizers_path.is_dir() and not overwrite
    # Every corpus and dev set is found and checked before anything is built or deleted; the
    # training corpora stream from their files (one corpus is a mix of one).
    mix = None
    if train_pairs is None:
        mix = Mix.load(data)
        if data.is_mix:
            data = data.replace(dataset_weights=tuple(round(w, 6) for w in mix.weights))
    dev_sets = {"dev": validation_pairs} if validation_pairs is not None else load_dev_sets(data)
    validation_pairs = next(iter(dev_sets.values()))
    if overwrite and run.root.exists() and chief:
        clear_run_dir(run.root)  # under the run's lock, which stays
    tokenizers = prepare_tokenizers(
        run,
        train_pairs if mix is None else mix,  # a sample drawn across the mix
        data,
        train_config,
        reuse=chief or had_tokenizers,
        save=chief,
        progress=progress and chief,
    )
    if not stored.get("model"):
        model_config = (model_config or ModelConfig()).replace(
            input_vocab_size=int(tokenizers.source.get_vocab_size()),
            target_vocab_size=int(tokenizers.target.get_vocab_size()),
        )
        check_shared_embeddings(model_config, tokenizers)
    common = {
        "data": data.recorded().to_dict(),
        "workers": workers,
    }
    batches = epoch_batches(
        train_pairs if mix is None else mix,
        tokenizers,
        train_config,
        on_mix=MixLog(run, mix, verbose=progress)
        if data.is_mix and mix is not None and chief
        else None,
    )
    val_batches = validation_batches(validation_pairs, tokenizers, train_config)
    validate = None
    if train_config.eval_every:
        from tf_transformer.training.validation import Validator

        validate = Validator.for_run(run, dev_sets, tokenizers, train_config)
    if fit:
        from tf_transformer.training.fit.model_fit import fit as fit_model

        return fit_model(
            run,
            model_config,
            train_config,
            batches,
            val_batches,
            validate=validate,
            on_epoch_begin=batches.log_mix,
            verbose=int(progress),
            **common,
        )
    return train(
        run,
        model_config,
        train_config,
        batches,
        val_batches,
        progress=progress,
        on_step=on_step,
        validate=validate,
        **common,
    )
