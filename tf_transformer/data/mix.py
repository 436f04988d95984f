"""Several corpora at once: each training pair drawn from corpus i with probability w_i.

A `Mix` finds, counts and checks the training split of every corpus of a `DataConfig` (so a
missing or misaligned corpus fails before any work starts) without reading any corpus into
memory, and draws an epoch of pairs with tf.data's own `Dataset.sample_from_datasets`: each
corpus streams pass after pass, each pass in its own order (`tf_transformer.data.corpus`), and
the epoch takes as many pairs as the corpora hold together, each from the corpus a stateless
draw (`corpus_choices`) names. With the default weights
(proportional to size) an epoch is close to the corpora concatenated; a higher weight repeats a
small corpus more often. One corpus alone is one pass over it per epoch: every pair once.

Every draw depends only on the seed, which may be a tensor: `pairs(seed + epoch)` is the same
epoch whether the custom loop builds it for each epoch or `model.fit` reads the epoch from a
variable when its pass over the data starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path

import numpy as np
import tensorflow as tf

from tf_transformer.data.corpus import (
    WHOLE,
    FileCorpus,
    Shard,
    by_line,
    endless,
    without_auto_shard,
)
from tf_transformer.errors import InvalidValueError

_graph = tf.autograph.experimental.do_not_convert
_CHOICE_BATCH = 65536
# A vocabulary sample's share of a corpus from which it is read in random runs of lines.
RUNS_FROM = 100_000


def corpus_name(spec: str) -> str:
    """The name a corpus is reported under: a directory's or file's name, or the spec itself
    (`../shared/data/tatoeba_pt_en` -> `tatoeba_pt_en`, `sample` -> `sample`)."""
    path = Path(spec)
    if path.name.lower().endswith(".tsv.gz"):
        return path.name[: -len(".tsv.gz")]
    return path.stem if path.suffix.lower() == ".tsv" else (path.name or spec)


def unique_names(specs) -> list[str]:
    """`corpus_name` of each spec; two specs of one name are refused (they would share logs)."""
    names = [corpus_name(spec) for spec in specs]
    for name in names:
        if names.count(name) > 1:
            raise InvalidValueError(
                f"two corpora are both named {name!r} ({', '.join(specs)}): give each its own "
                "directory name."
            )
    return names


def count_elements(dataset: tf.data.Dataset) -> int:
    """The number of elements (the cardinality when tf.data knows it, else counted)."""
    size = int(dataset.cardinality())
    if size >= 0:
        return size
    add_one = _graph(lambda count, _: count + 1)
    return int(dataset.reduce(np.int64(0), add_one))


def corpus_choices(weights, size: int, seed) -> tf.data.Dataset:
    """`size` corpus indices drawn with probabilities `weights`, a stateless function of `seed`
    (an int or an int64 tensor): which corpus each pair of an epoch comes from."""
    logits = tf.math.log(tf.constant([weights], tf.float64))
    seed = tf.cast(seed, tf.int64)

    def draw(index, positions):
        batch_seed = tf.stack([seed, index])
        drawn = tf.random.stateless_categorical(logits, tf.size(positions), batch_seed)
        return drawn[0]

    batches = tf.data.Dataset.range(size).batch(_CHOICE_BATCH).enumerate()
    return batches.map(_graph(draw)).unbatch()


@dataclasses.dataclass
class Mix:
    """The training corpora of a run and their sampling weights.

    Attributes:
      names: each corpus's name (`corpus_name`).
      corpora: each corpus (`FileCorpus` or `DatasetCorpus`).
      weights: the sampling probabilities (they sum to 1).
      shuffle_buffer: the pairs each corpus is shuffled in as it streams.
    """

    names: list[str]
    corpora: list
    weights: list[float]
    shuffle_buffer: int = 100_000

    @classmethod
    def load(cls, data, split: str = "train") -> Mix:
        """Finds and checks `split` of each corpus of `data` (a `DataConfig`).

        Raises:
          DataFormatError: a corpus is missing, malformed or misaligned (its error names it).
          ValueError: an unknown spec, a corpus with no pairs, or two corpora of one name.
        """
        names = unique_names(data.dataset)
        corpora = [data.corpus(split, spec) for spec in data.dataset]
        for spec, corpus in zip(data.dataset, corpora):
            if not corpus.size:
                raise InvalidValueError(f"corpus {spec} has no {split} pairs.")
        weights = data.dataset_weights or [corpus.size for corpus in corpora]
        total = float(sum(weights))
        return cls(names, corpora, [w / total for w in weights], data.corpus_shuffle_buffer)

    @property
    def sizes(self) -> list[int]:
        """Each corpus's number of pairs."""
        return [corpus.size for corpus in self.corpora]

    @property
    def epoch_size(self) -> int:
        """Pairs per epoch: as many as the corpora hold together."""
        return sum(self.sizes)

    def pairs(self, seed, *, shard: Shard = WHOLE) -> tf.data.Dataset:
        """One epoch of mixed `(source, target)` pairs; the same `seed` (an int, or an int64
        tensor) gives the same pairs in the same order.

        With `shard=(index, count)`, worker `index`'s part of the epoch: choices `index`,
        `index + count`, ... of the epoch's draw, each taken from that worker's part of its
        corpus (`FileCorpus.shuffled`), so the workers together draw the epoch's pairs per
        corpus (`shares`), and one corpus alone is one pass over it split between them."""
        seed, shard = tf.cast(seed, tf.int64), Shard(*shard)
        if len(self.corpora) == 1:  # one pass: every pair once
            pass_seed = tf.stack([seed * 1000, tf.constant(0, tf.int64)])
            return self.corpora[0].shuffled(
                pass_seed, shuffle_buffer=self.shuffle_buffer, shard=shard
            )
        streams = [
            endless(corpus, seed * 1000 + index, shuffle_buffer=self.shuffle_buffer, shard=shard)
            for index, corpus in enumerate(self.corpora)
        ]
        choices = by_line(corpus_choices(self.weights, self.epoch_size, seed), shard)
        mixed = tf.data.Dataset.choose_from_datasets(streams, choices)
        return mixed if shard.count == 1 else without_auto_shard(mixed)

    def shares(self, seed: int) -> dict[str, int]:
        """How many pairs of each corpus `pairs(seed)` holds: the same draws, made on the
        corpora's indices instead of their pairs."""
        if len(self.corpora) == 1:
            return {self.names[0]: self.epoch_size}
        drawn = corpus_choices(self.weights, self.epoch_size, seed)
        counts = drawn.batch(_CHOICE_BATCH).reduce(
            tf.zeros(len(self.names), tf.int64),
            _graph(
                lambda total, batch: (
                    total + tf.math.bincount(batch, minlength=len(self.names), dtype=tf.int64)
                )
            ),
        )
        return dict(zip(self.names, counts.numpy().tolist()))

    def sample_sizes(self, size: int) -> list[int]:
        """How many pairs of each corpus a sample of `size` pairs (at most an epoch) draws:
        its weight's share."""
        size = min(size, self.epoch_size)
        return [round(size * weight) for weight in self.weights]

    def sample(self, size: int, seed: int) -> tf.data.Dataset:
        """About `sample_sizes(size)` pairs of each corpus, drawn by their weights: each pair of
        corpus i is kept with probability q_i / n_i (over as many passes as a weight above its
        size needs), so the count is q_i give or take sqrt(q_i). With `size` at least an epoch
        and the default weights, that is every pair once. The same seed gives the same sample.

        A corpus is read once, in file order. One of more than q_i pairs with q_i at least
        `RUNS_FROM` (a plain-text file corpus) is read only in part: n_i is then the pairs of
        enough runs of 1,000 consecutive lines at random marks (`read_runs`) to hold q_i,
        so drawing takes the same time from a corpus of 1 million pairs as from 10 million.

        The tokenizers learn from it (`TrainConfig.vocab_sample`).
        """
        samples = []
        for index, (corpus, wanted) in enumerate(zip(self.corpora, self.sample_sizes(size))):
            pairs, count = corpus.pairs(), corpus.size
            passes = max(1, math.ceil(wanted / corpus.size))
            seekable = isinstance(corpus, FileCorpus) and corpus.files.marks is not None
            if seekable and corpus.size > wanted >= RUNS_FROM:
                pairs, count = read_runs(corpus.files, wanted, seed=seed * 1000 + index)
            keep = wanted / (count * passes)
            pairs = pairs.repeat(passes)
            if keep < 1.0:
                pairs = _bernoulli(pairs, keep, (seed, index))
            samples.append(pairs)
        sample = samples[0]
        for more in samples[1:]:
            sample = sample.concatenate(more)
        return sample

    def describe(self, counts: dict[str, int]) -> str:
        """`mix: tatoeba_pt_en 41.2% (4,512 pairs, weight 0.40), ...`."""
        total = max(sum(counts.values()), 1)
        parts = [
            f"{name} {100 * counts[name] / total:.1f}% ({counts[name]:,} pairs, weight {weight:.3f})"
            for name, weight in zip(self.names, self.weights)
        ]
        return "mix: " + ", ".join(parts)


def read_runs(files, wanted: int, seed: int) -> tuple[tf.data.Dataset, int]:
    """`(pairs, count)`: the `count` pairs of enough runs of `mark_lines` lines at the marks of
    `files` (a `CorpusFiles` with marks: every file plain text), drawn at random by `seed`
    without replacement, to hold `wanted` pairs; read in file order from their byte offsets with
    Python's `seek`, so the time grows with `wanted`, not with the corpus (`Mix.sample`)."""
    step = files.mark_lines
    runs = [(shard, i) for shard, size in enumerate(files.lines) for i in range(-(-size // step))]
    count = min(len(runs), -(-wanted // step))
    chosen = [runs[i] for i in sorted(np.random.default_rng(seed).choice(len(runs), count, False))]
    count = sum(min(step, files.lines[shard] - run * step) for shard, run in chosen)
    sides = (files.sources,) if files.is_tsv else (files.sources, files.targets)

    def lines(handle, start, end):
        handle.seek(start)
        return [line.removesuffix(b"\r") for line in handle.read(end - start).split(b"\n")[:-1]]

    def read():
        with contextlib.ExitStack() as stack:
            opened = {}
            for shard, run in chosen:
                for side, paths in enumerate(sides):
                    if (shard, side) not in opened:
                        opened[shard, side] = stack.enter_context(open(paths[shard], "rb"))
                parts = [
                    lines(opened[shard, side], *files.marks[shard][side][run : run + 2])
                    for side in range(len(sides))
                ]
                if files.is_tsv:  # checked: a tab in every line
                    parts = list(zip(*(line.split(b"\t", 1) for line in parts[0])))
                yield tuple(parts)

    spec = (tf.TensorSpec([None], tf.string),) * 2
    return tf.data.Dataset.from_generator(read, output_signature=spec).unbatch(), count


def _bernoulli(pairs: tf.data.Dataset, keep: float, seed) -> tf.data.Dataset:
    """Each pair kept with probability `keep` (a stateless draw of `seed` and its position),
    decided a batch at a time."""

    def kept(index, batch):
        source, target = batch
        pass_seed = tf.stack([tf.constant(seed[0] * 1000 + seed[1], tf.int64), index])
        draw = tf.random.stateless_uniform(tf.shape(source), pass_seed)
        mask = draw < keep
        return tf.boolean_mask(source, mask), tf.boolean_mask(target, mask)

    batches = pairs.batch(4096).enumerate().map(_graph(kept), num_parallel_calls=tf.data.AUTOTUNE)
    return batches.unbatch()
