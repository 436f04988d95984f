"""What `run` prepares before training: the run's tokenizers (learnt from a bounded sample), its
training batches (one order per epoch, a mix of corpora drawn anew each epoch, in the custom loop
and under `model.fit`, and logged by `MixLog`) and validation batches, and the check that shared
embeddings have one vocabulary."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from tf_transformer.config import DataConfig, ModelConfig, TrainConfig
from tf_transformer.data.concatenation import add_concatenations
from tf_transformer.data.corpus import WHOLE, Shard, by_line
from tf_transformer.data.mix import Mix
from tf_transformer.data.pipeline import make_batches
from tf_transformer.errors import InvalidValueError
from tf_transformer.run_dir import RunDir


class EpochBatches:
    """The training batches of each epoch: `batches(epoch)`, shuffled with `seed + epoch`.

    The custom loop asks for each epoch's batches (a resumed run rebuilds epoch k's order
    exactly). `model.fit` iterates one dataset (`each_pass`) whose every pass draws the mix of
    the next epoch, so each epoch draws its own mix there too (the pairs of epoch k are those
    the custom loop draws). With
    `concat_fraction`, each epoch adds its own joined pairs.

    Args:
      pairs: `(source, target)` string pairs, or a `Mix` of corpora: each epoch then draws its
        own mix (seed `seed + epoch`).
      tokenizers: a `Tokenizers` with `.source` and `.target`.
      train_config: supplies max_tokens, token_budget, shuffle_buffer, seed and
        concat_fraction.
      on_mix: with a `Mix`, called with each epoch and its pairs per corpus (`Mix.shares`):
        by `batches(epoch)`, or by `log_mix(epoch)` (`model.fit`, at each epoch's start).
    """

    def __init__(
        self,
        pairs: tf.data.Dataset | Mix,
        tokenizers,
        train_config: TrainConfig,
        *,
        on_mix: Callable[[int, dict[str, int]], None] | None = None,
    ):
        self.pairs, self.tokenizers, self.train_config = pairs, tokenizers, train_config
        self.on_mix = on_mix

    def log_mix(self, epoch: int) -> None:
        """Reports epoch `epoch`'s pairs per corpus to `on_mix` (with a `Mix`)."""
        if isinstance(self.pairs, Mix) and self.on_mix is not None:
            self.on_mix(epoch, self.pairs.shares(self.train_config.seed + epoch))

    def __call__(self, epoch: int, shard: Shard = WHOLE) -> tf.data.Dataset:
        """Epoch `epoch`'s batches (a `Mix`: its draw, reported to `on_mix`); with `shard`
        (`TrainConfig.shard_data`), the batches of one worker's part of the epoch's pairs
        (`Mix.pairs`; other pairs: every `count`-th), so the workers' parts hold each once."""
        drawn = self.pairs
        if isinstance(drawn, Mix):
            self.log_mix(epoch)
            drawn = drawn.pairs(self.train_config.seed + epoch, shard=shard)
        else:
            drawn = by_line(drawn, shard)
        return self._batches(drawn, epoch)

    def each_pass(self, epoch: tf.Variable) -> tf.data.Dataset:
        """One dataset for `model.fit`, whose every pass is an epoch of its own: a `Mix`'s
        pass takes the epoch that `epoch` (an int64 variable, set to the first epoch) holds
        when the pass starts, and adds one to it, then draws that epoch's mix and batches it.
        Keras starts a pass each epoch (and `repeat()` one after the other), so epoch k reads
        the mix the custom loop draws for epoch k; the shuffles after the draw are seeded by
        `seed` alone. Other pairs: epoch `epoch`'s batches, reshuffled on each pass."""
        if not isinstance(self.pairs, Mix):
            return self._batches(self.pairs, int(epoch.numpy()))
        mix, seed = self.pairs, self.train_config.seed

        def one_pass(_):
            drawn = epoch.assign_add(1) - 1
            return self._batches(mix.pairs(seed + drawn), 0)

        one = tf.data.Dataset.from_tensors(0)
        return one.flat_map(tf.autograph.experimental.do_not_convert(one_pass))

    def _batches(self, drawn: tf.data.Dataset, epoch: int) -> tf.data.Dataset:
        config = self.train_config
        epoch_pairs = add_concatenations(
            drawn,
            config.concat_fraction,
            seed=2 * (config.seed + epoch),  # two shuffles per epoch, none shared
            shuffle_buffer=config.shuffle_buffer,
        )
        return make_batches(
            epoch_pairs,
            self.tokenizers,
            max_tokens=config.max_tokens,
            token_budget=config.token_budget,
            shuffle_buffer=config.shuffle_buffer,
            seed=config.seed + epoch,
            cache=False,  # a fresh pipeline per epoch: its first pass is its only pass
        )


def epoch_batches(
    pairs: tf.data.Dataset | Mix,
    tokenizers,
    train_config: TrainConfig,
    *,
    on_mix: Callable[[int, dict[str, int]], None] | None = None,
) -> EpochBatches:
    """The training batches, a function `epoch -> batches` (see `EpochBatches`)."""
    return EpochBatches(pairs, tokenizers, train_config, on_mix=on_mix)


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
    `pairs` (a `Mix`: a sample of `train_config.vocab_sample` pairs drawn by its weights, see
    `Mix.sample`; a dataset: its first `vocab_sample` pairs) and saved (when `save`: the other workers of a multi-worker job learn the same
    ones without saving, and never read what the chief may be writing), with progress bars
    when `progress`."""
    from tf_transformer.text.tokenizers import build_tokenizers

    if reuse and run.tokenizers_path.is_dir():
        return run.load_tokenizers()
    if isinstance(pairs, Mix):
        sample = pairs.sample(train_config.vocab_sample, seed=train_config.seed)
        sample_size = sum(pairs.sample_sizes(train_config.vocab_sample))
    else:
        sample, sample_size = pairs.take(train_config.vocab_sample), None
    languages = 2 if train_config.shared_vocab else 1  # a shared vocabulary: N words of each
    tokenizers = build_tokenizers(
        sample,
        sample_size=sample_size,
        vocab_size=train_config.vocab_size,
        learn_params={
            "lower_thresh": train_config.vocab_min_count,
            "max_input_tokens": train_config.vocab_max_words * languages,
        },
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
