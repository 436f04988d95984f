"""What `run` prepares before training: the run's tokenizers, its training batches (one order per
epoch, a mix of corpora drawn anew each epoch and logged by `MixLog`) and validation batches,
and the check that shared embeddings have one vocabulary."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from tf_transformer.config import DataConfig, ModelConfig, TrainConfig
from tf_transformer.data.concatenation import add_concatenations
from tf_transformer.data.mix import Mix
from tf_transformer.data.pipeline import make_batches
from tf_transformer.errors import InvalidValueError
from tf_transformer.run_dir import RunDir


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
        raise InvalidValueError(
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
