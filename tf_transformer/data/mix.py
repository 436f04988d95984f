"""Several corpora at once: each training pair drawn from corpus i with probability w_i.

A `Mix` loads the training split of every corpus of a `DataConfig` (so a missing or misaligned
corpus fails before any work starts), and draws an epoch of pairs with tf.data's own
`Dataset.sample_from_datasets`: each corpus is repeated and shuffled, and the epoch takes as
many pairs as the corpora hold together. With the default weights (proportional to size) an
epoch is close to the corpora concatenated; a higher weight repeats a small corpus more often.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

from tf_transformer.errors import InvalidValueError


def corpus_name(spec: str) -> str:
    """The name a corpus is reported under: a directory's or file's name, or the spec itself
    (`../shared/data/tatoeba_pt_en` -> `tatoeba_pt_en`, `sample` -> `sample`)."""
    path = Path(spec)
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
    add_one = tf.autograph.experimental.do_not_convert(lambda count, _: count + 1)
    return int(dataset.reduce(np.int64(0), add_one))


def sample_mix(datasets, weights, seed: int) -> tf.data.Dataset:
    """Endless draws from `datasets` (each endless) with probabilities `weights`; the choice
    of corpus depends only on `weights` and `seed`, not on the data (see `Mix.shares`)."""
    return tf.data.Dataset.sample_from_datasets(
        datasets, weights=list(weights), seed=seed, stop_on_empty_dataset=False
    )


@dataclasses.dataclass
class Mix:
    """The training corpora of a run and their sampling weights.

    Attributes:
      names: each corpus's name (`corpus_name`).
      corpora: each corpus's `(source, target)` string pairs.
      sizes: each corpus's number of pairs.
      weights: the sampling probabilities (they sum to 1).
    """

    names: list[str]
    corpora: list[tf.data.Dataset]
    sizes: list[int]
    weights: list[float]

    @classmethod
    def load(cls, data, split: str = "train") -> Mix:
        """Loads `split` of each corpus of `data` (a `DataConfig`), checking every file.

        Raises:
          DataFormatError: a corpus is missing, malformed or misaligned (its error names it).
          ValueError: an unknown spec, a corpus with no pairs, or two corpora of one name.
        """
        names = unique_names(data.dataset)
        corpora = [data.load(split, spec) for spec in data.dataset]
        sizes = [count_elements(pairs) for pairs in corpora]
        for spec, size in zip(data.dataset, sizes):
            if not size:
                raise InvalidValueError(f"corpus {spec} has no {split} pairs.")
        weights = data.dataset_weights or sizes
        total = float(sum(weights))
        return cls(names, corpora, sizes, [w / total for w in weights])

    @property
    def epoch_size(self) -> int:
        """Pairs per epoch: as many as the corpora hold together."""
        return sum(self.sizes)

    def pairs(self, seed: int) -> tf.data.Dataset:
        """One epoch of mixed `(source, target)` pairs; the same `seed` gives the same pairs
        in the same order (each corpus shuffled with its own seed derived from it)."""
        endless = [
            corpus.repeat().shuffle(size, seed=seed * 1000 + index, reshuffle_each_iteration=False)
            for index, (corpus, size) in enumerate(zip(self.corpora, self.sizes))
        ]
        return sample_mix(endless, self.weights, seed).take(self.epoch_size)

    def shares(self, seed: int) -> dict[str, int]:
        """How many pairs of each corpus `pairs(seed)` holds: the same draws, made on the
        corpora's indices instead of their pairs."""
        indices = [
            tf.data.Dataset.from_tensors(np.int64(i)).repeat() for i in range(len(self.names))
        ]
        drawn = sample_mix(indices, self.weights, seed).take(self.epoch_size)
        counts = drawn.batch(65536).reduce(
            tf.zeros(len(self.names), tf.int64),
            tf.autograph.experimental.do_not_convert(
                lambda total, batch: (
                    total + tf.math.bincount(batch, minlength=len(self.names), dtype=tf.int64)
                )
            ),
        )
        return dict(zip(self.names, counts.numpy().tolist()))

    def describe(self, counts: dict[str, int]) -> str:
        """`mix: tatoeba_pt_en 41.2% (4,512 pairs, weight 0.40), ...`."""
        total = max(sum(counts.values()), 1)
        parts = [
            f"{name} {100 * counts[name] / total:.1f}% ({counts[name]:,} pairs, weight {weight:.3f})"
            for name, weight in zip(self.names, self.weights)
        ]
        return "mix: " + ", ".join(parts)
