"""`run`: the one entry point that owns a training run, from data to the last checkpoint.

The CLI (`tf-transformer train`), `make demo`, the notebooks and `bench/quality.py` all train
through it. It loads the data, builds the tokenizers (or reloads a run's), builds the batches
once, and hands them to the custom loop or to `model.fit`, which record config.json and resume
from the run's checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import DataConfig, ModelConfig, TrainConfig
from tf_transformer.data.concatenation import add_concatenations
from tf_transformer.data.dev_sets import load_dev_sets
from tf_transformer.data.mix import Mix
from tf_transformer.data.pipeline import make_batches
from tf_transformer.run_dir import RunDir
from tf_transformer.training.distribute import get_strategy, is_chief
from tf_transformer.training.loop import TrainResult, train
from tf_transformer.training.resume import apply_train_changes, resumed_configs
from tf_transformer.training.run_lock import clear_run_dir, holding_run_lock


def epoch_batches(
    pairs: tf.data.Dataset | Mix,
    tokenizers,
    train_config: TrainConfig,
    *,
    on_mix: Callable[[int, dict[str, int]], None] | None = None,
) -> Callable:
    """The training batches: a function `epoch -> batches`, shuffled with `seed + epoch`.

    The custom loop asks for each epoch's batches (a resumed run rebuilds epoch k's order
    exactly); `model.fit` takes epoch 0's, which reshuffles on every pass. With
    `concat_fraction`, each epoch adds its own joined pairs (`model.fit`: epoch 0's, every pass).

    Args:
      pairs: `(source, target)` string pairs, or a `Mix` of corpora: each epoch then draws its
        own mix (seed `seed + epoch`).
      tokenizers: a `Tokenizers` with `.source` and `.target`.
      train_config: supplies max_tokens, token_budget, shuffle_buffer, seed and
        concat_fraction.
      on_mix: with a `Mix`, called with each epoch and its pairs per corpus (`Mix.shares`).
    """

    def batches(epoch: int) -> tf.data.Dataset:
        drawn = pairs
        if isinstance(pairs, Mix):
            drawn = pairs.pairs(train_config.seed + epoch)
            if on_mix is not None:
                on_mix(epoch, pairs.shares(train_config.seed + epoch))
        epoch_pairs = add_concatenations(
            drawn,
            train_config.concat_fraction,
            seed=2 * (train_config.seed + epoch),  # two shuffles per epoch, none shared
            shuffle_buffer=train_config.shuffle_buffer,
        )
        return make_batches(
            epoch_pairs,
            tokenizers,
            max_tokens=train_config.max_tokens,
            token_budget=train_config.token_budget,
            shuffle_buffer=train_config.shuffle_buffer,
            seed=train_config.seed + epoch,
            cache=False,  # a fresh pipeline per epoch: its first pass is its only pass
        )

    return batches


def validation_batches(pairs: tf.data.Dataset, tokenizers, train_config: TrainConfig):
    """The validation batches: the training batches' sizes, in a fixed order."""
    return make_batches(
        pairs,
        tokenizers,
        max_tokens=train_config.max_tokens,
        token_budget=train_config.token_budget,
        shuffle=False,
    )


def prepare_tokenizers(
    run: RunDir,
    pairs,
    data: DataConfig,
    train_config: TrainConfig,
    *,
    reuse: bool = True,
    save: bool = True,
    progress: bool = False,
):
    """The run's tokenizers: reloaded when the run has them (and `reuse`), else learnt from
    `pairs` and saved (when `save`: the other workers of a multi-worker job learn the same
    ones without saving, and never read what the chief may be writing), with progress bars
    when `progress`."""
    from tf_transformer.text.tokenizers import build_tokenizers

    if reuse and run.tokenizers_path.is_dir():
        return run.load_tokenizers()
    tokenizers = build_tokenizers(
        pairs,
        vocab_size=train_config.vocab_size,
        learn_params={"lower_thresh": train_config.vocab_min_count},
        source_lang=data.source_lang,
        target_lang=data.target_lang,
        lower_case_source=train_config.lower_case_source,
        truecase_target=train_config.truecase_target,
        shared_vocab=train_config.shared_vocab,
        progress=progress,
    )
    if save:
        tokenizers.save(str(run.tokenizers_path))
    return tokenizers


def check_shared_embeddings(model_config: ModelConfig, tokenizers=None) -> None:
    """Refuses `share_embeddings` (one matrix for both languages) unless source and target
    share one vocabulary: the tokenizers', when given, must be the same list of tokens."""
    if not model_config.share_embeddings:
        return
    if tokenizers is None or tokenizers.source.vocab.numpy().tolist() != (
        tokenizers.target.vocab.numpy().tolist()
    ):
        raise ValueError(
            "share_embeddings ties the source and target embeddings, so both need one "
            "vocabulary: train with shared_vocab (--shared-vocab), or untie them "
            "(--no-share-embeddings)"
            + ("." if tokenizers is None else "; this run's tokenizers have two.")
        )


class MixLog:
    """Logs each epoch's pairs per corpus of a mix: a line (when `verbose`) and
    `logs/mix.json` (`{"names", "weights", "sizes", "epochs": {epoch: {name: pairs}}}`)."""

    def __init__(self, run: RunDir, mix: Mix, *, verbose: bool = True):
        self.path = run.root / "logs" / "mix.json"
        self.mix, self.verbose = mix, verbose

    def __call__(self, epoch: int, counts: dict[str, int]) -> None:
        import json

        from tqdm.auto import tqdm

        from tf_transformer.atomic_files import write_json

        if self.verbose:
            tqdm.write(f"epoch {epoch + 1} {self.mix.describe(counts)}")
        record = {"names": self.mix.names, "weights": self.mix.weights, "sizes": self.mix.sizes}
        epochs = json.loads(self.path.read_text())["epochs"] if self.path.is_file() else {}
        epochs[str(epoch)] = counts
        write_json(self.path, {**record, "epochs": epochs})


@holding_run_lock
def run(
    run_dir: str | Path,
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
    A resume may change only the limits and how the run runs (`training.resume.RESUMABLE`,
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
        `max_steps` without `epochs` lifts the epoch limit (`training.resume`).
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
    run = RunDir(run_dir)
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
    if not stored.get("model") and model_config is not None and not train_config.shared_vocab:
        check_shared_embeddings(model_config)  # before the data loads
    # A multi-worker strategy configures its collectives when it is made, before TensorFlow
    # runs anything (so before the data loads); only its chief writes the run directory.
    had_tokenizers = run.tokenizers_path.is_dir() and not overwrite
    strategy = strategy or get_strategy(train_config.strategy)
    chief = is_chief(strategy)
    # Every corpus and dev set is read (and checked) before anything is built or deleted.
    mix = None
    if train_pairs is None:
        if data.is_mix:
            mix = Mix.load(data)
            data = data.replace(dataset_weights=tuple(round(w, 6) for w in mix.weights))
        else:
            train_pairs = data.load("train")
    dev_sets = {"dev": validation_pairs} if validation_pairs is not None else load_dev_sets(data)
    validation_pairs = next(iter(dev_sets.values()))
    if overwrite and run.root.exists() and chief:
        clear_run_dir(run.root)  # under the run's lock, which stays
    tokenizers = prepare_tokenizers(
        run,
        train_pairs if mix is None else mix.pairs(train_config.seed),  # built over the mix
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
        "strategy": strategy,
    }
    batches = epoch_batches(
        train_pairs if mix is None else mix,
        tokenizers,
        train_config,
        on_mix=MixLog(run, mix, verbose=progress) if mix is not None and chief else None,
    )
    val_batches = validation_batches(validation_pairs, tokenizers, train_config)
    validate = None
    if train_config.eval_every:
        from tf_transformer.training.validation import Validator

        validate = Validator.for_run(run, dev_sets, tokenizers, train_config)
    if fit:
        from tf_transformer.training.fit import fit as fit_model

        return fit_model(
            run,
            model_config,
            train_config,
            batches,
            val_batches,
            validate=validate,
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
