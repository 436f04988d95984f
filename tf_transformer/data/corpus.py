"""A training corpus as tf.data streams: its pairs in file order, or one shuffled pass per seed.

`FileCorpus` streams text and TSV files (`tf.data.TextLineDataset`, gzip or not) and never holds
the corpus: memory is the shuffle buffer, plus a read buffer per open file. `DatasetCorpus`
wraps a dataset that is small enough to be held (the built-in corpora, TFDS).

How random a shuffled pass of a `FileCorpus` is: each shard is cut into pieces (at least
`READERS` pieces over the whole corpus, so a single file gives 8), and each pass turns every shard
by its own random number of lines, shuffles the order of the pieces, reads up to `CYCLE` pieces
at once, one line from each in turn, and puts each window of `shuffle_buffer` consecutive pairs
of that stream in a random order (`window_shuffle`). So the pairs of one piece come out in
roughly file order, spread across the epoch, and mixed with those of the other pieces read at
the same time; a pair stays in its window. Pairs more than about `shuffle_buffer / pieces read
at once` lines apart in one file are never swapped, so a file sorted by length or by source
still gives epochs that drift along that order; cut such a file into shards (or shuffle it once
with `shuf`) for a better mix. Each pass reads each piece from
its shard's start (gzip cannot seek): a single file of `READERS` pieces is read about 4-12 times
per pass, which is fast beside training (docs/data.md gives the figures).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

from tf_transformer.data.text_files import CorpusFiles

READERS = 8  # pieces a corpus is cut into at least, each read by its own reader
CYCLE = 16  # pieces read at once
_graph = tf.autograph.experimental.do_not_convert


def _pair_seeds(seed) -> tf.Tensor:
    """Three stateless seeds (shape ``(3, 2)``) from a seed of shape ``(2,)``."""
    return tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)


def window_shuffle(pairs: tf.data.Dataset, size: int, seed) -> tf.data.Dataset:
    """`pairs` cut into windows of `size` consecutive pairs, each window in a random order
    drawn from `seed` (shape ``(2,)``, a tensor too) and its index.

    Stateless, unlike `Dataset.shuffle`, whose seed cannot be a tensor computed inside a
    tf.data function when TensorFlow's global seed is 0 (its seed check compares it in Python).
    """
    seed = tf.cast(seed, tf.int64)

    def permute(index, batch):
        source, target = batch
        window_seed = tf.random.experimental.stateless_fold_in(seed, index)
        order = tf.argsort(tf.random.stateless_uniform(tf.shape(source), window_seed))
        return tf.gather(source, order), tf.gather(target, order)

    windows = pairs.batch(size).enumerate()
    return windows.map(_graph(permute), num_parallel_calls=tf.data.AUTOTUNE).unbatch()


@dataclasses.dataclass(frozen=True)
class FileCorpus:
    """A corpus streamed from its (checked) files; see the module docstring for the order."""

    files: CorpusFiles

    @property
    def size(self) -> int:
        return self.files.size

    def _pieces(self, readers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each piece's shard, first line and number of lines, shard by shard."""
        per_shard = math.ceil(readers / len(self.files.lines))
        shards, starts, counts = [], [], []
        for shard, lines in enumerate(self.files.lines):
            length = max(1, math.ceil(lines / per_shard))
            for start in range(0, lines, length):
                shards.append(shard)
                starts.append(start)
                counts.append(min(length, lines - start))
        return (np.array(shards, np.int64), np.array(starts, np.int64), np.array(counts, np.int64))

    def _read(self, shard, start, count) -> tf.data.Dataset:
        """Lines `start` to `start + count` of a shard as pairs; past its end, it goes on
        from the shard's first line (a turned shard's last piece)."""

        def lines(paths):
            path = tf.gather(tf.constant([str(p) for p in paths]), shard)
            gzip = tf.constant(["GZIP" if p.suffix == ".gz" else "" for p in paths])
            read = tf.data.TextLineDataset(path, compression_type=tf.gather(gzip, shard))
            return read.repeat(2).skip(start).take(count)

        if self.files.is_tsv:
            split = _graph(lambda line: tuple(tf.unstack(tf.strings.split(line, "\t", 1), 2)))
            return lines(self.files.sources).map(split)
        return tf.data.Dataset.zip(lines(self.files.sources), lines(self.files.targets))

    def pairs(self) -> tf.data.Dataset:
        """The pairs in file order, shard after shard."""
        shards, starts, counts = self._pieces(1)
        pieces = tf.data.Dataset.from_tensor_slices((shards, starts, counts))
        return pieces.flat_map(_graph(self._read))

    def shuffled(self, seed, *, shuffle_buffer: int) -> tf.data.Dataset:
        """One pass over every pair, in an order drawn from `seed` (shape ``(2,)``, a tensor
        too: an endless stream passes its pass number in it)."""
        order_seed, turn_seed, shuffle_seed = tf.unstack(_pair_seeds(seed))
        shards, starts, counts = self._pieces(READERS)
        lines = tf.constant(self.files.lines, tf.int64)
        # Each shard turned by a random number of its lines, so pieces start elsewhere each pass.
        turns = tf.cast(
            tf.random.stateless_uniform([len(self.files.lines)], turn_seed, dtype=tf.float64)
            * tf.cast(lines, tf.float64),
            tf.int64,
        )
        order = tf.random.experimental.stateless_shuffle(tf.range(len(shards)), order_seed)
        starts = tf.gather(starts + tf.gather(turns, shards), order)
        pieces = tf.data.Dataset.from_tensor_slices(
            (tf.gather(shards, order), starts, tf.gather(counts, order))
        )
        read = pieces.interleave(
            _graph(self._read),
            cycle_length=min(len(shards), CYCLE),
            block_length=1,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return window_shuffle(read, shuffle_buffer, shuffle_seed)


@dataclasses.dataclass(frozen=True)
class DatasetCorpus:
    """A corpus held as a dataset (the built-in corpora, TFDS): it is small, so a window of
    `shuffle_buffer` pairs usually holds it whole."""

    dataset: tf.data.Dataset
    size: int

    def pairs(self) -> tf.data.Dataset:
        return self.dataset

    def shuffled(self, seed, *, shuffle_buffer: int) -> tf.data.Dataset:
        """One pass in an order drawn from `seed` (shape ``(2,)``)."""
        return window_shuffle(self.dataset, min(shuffle_buffer, self.size), seed)


def endless(corpus, seed, *, shuffle_buffer: int) -> tf.data.Dataset:
    """Pass after pass of `corpus` (a `FileCorpus` or `DatasetCorpus`), each in its own order:
    pass k is `corpus.shuffled((seed, k))`. `seed` may be a tensor."""
    seed = tf.cast(seed, tf.int64)

    def one_pass(k):
        return corpus.shuffled(tf.stack([seed, k]), shuffle_buffer=shuffle_buffer)

    return tf.data.Dataset.range(2**62).flat_map(_graph(one_pass))
