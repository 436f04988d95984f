"""A training corpus as tf.data streams: its pairs in file order, or one shuffled pass per seed.

`FileCorpus` streams text and TSV files (`tf.data.TextLineDataset`, gzip or not) and never holds
the corpus: memory is the shuffle buffer, plus a read buffer per open file. `DatasetCorpus`
wraps a dataset that is small enough to be held (the built-in corpora, TFDS).

How a shuffled pass reads: a plain-text corpus (every file uncompressed, ending in a newline)
is cut into pieces of `PIECE_LINES` lines (100,000) at the byte offsets of every 1,000th line,
which its check noted, so a piece is read from anywhere in a file without parsing the lines
before it (`tf.data.FixedLengthRecordDataset` still reads the bytes before its offset, so a
pass reads a file of P pieces about P/2 times over; docs/data.md has the time it takes); a corpus with a gzip file is cut into its shards (gzip cannot be read from an
offset). Each pass shuffles the order of the pieces, turns each piece to start at a random one of
its marks (the lines before it come last), reads `CYCLE` pieces at once, one line from each in
turn (the next piece starting where one ends), and puts each window of `shuffle_buffer`
consecutive pairs of that stream in a random order (`window_shuffle`).

How random that is: an epoch visits the pieces in a random order, and within a window of
`shuffle_buffer` pairs (about `shuffle_buffer / CYCLE` consecutive lines of each of 16 pieces)
the order is uniform; a pair never leaves its window. So neighbours in a file (within about
`shuffle_buffer / CYCLE` lines) stay close in an epoch, pieces far apart mix, and every pass
differs; an epoch that reads only part of a corpus (a weight below its share of the pairs)
reads other lines of each piece each time. A single gzip file is one piece: a pass reads it in file order, shuffled only within
each window; cut it into shards (``split``, then ``gzip`` each) or keep it uncompressed.

How workers split a pass (`shard=(index, count)`, see `Shard`): worker `index` of `count` reads
only the pieces whose number (in file order) is `index` modulo `count`, in its own order drawn
from the pass's seed, so the workers' pairs together are the pass, each pair once. A corpus of
fewer pieces than workers (a file of fewer than `PIECE_LINES` lines is one piece) is split by
line instead: every worker reads the whole pass, in the same order, and keeps pairs `index`,
`index + count`, ... of it.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tf_transformer.data.text_files import CorpusFiles

CYCLE = 16  # pieces read at once
PIECE_LINES = 100_000  # lines per piece of a plain-text corpus
BLOCK_BYTES = 1 << 20  # what a piece's reader reads at a time
_graph = tf.autograph.experimental.do_not_convert


class Shard(NamedTuple):
    """Which part of a pass a worker reads: part `index` of `count` (the whole pass: 0 of 1)."""

    index: int = 0
    count: int = 1


WHOLE = Shard()


def by_line(pairs: tf.data.Dataset, shard: Shard) -> tf.data.Dataset:
    """Pairs `shard.index`, `index + count`, ... of `pairs`, with tf.data's auto-sharding off
    (the part is already this worker's: sharding it again would drop pairs)."""
    if shard.count == 1:
        return pairs
    return without_auto_shard(pairs.shard(shard.count, shard.index))


def without_auto_shard(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with `tf.data.experimental.AutoShardPolicy.OFF`: a `tf.distribute` strategy
    that is given it whole does not split it again by file or by element."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options)


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
    piece_lines: int = PIECE_LINES

    @property
    def size(self) -> int:
        return self.files.size

    def _text_lines(self, paths, shard) -> tf.data.Dataset:
        """A whole shard's lines (`tf.data.TextLineDataset`, gzip or not)."""
        path = tf.gather(tf.constant([str(p) for p in paths]), shard)
        gzip = tf.constant(["GZIP" if p.suffix == ".gz" else "" for p in paths])
        return tf.data.TextLineDataset(path, compression_type=tf.gather(gzip, shard))

    def _byte_lines(self, paths, side: int, shard, ranges) -> tf.data.Dataset:
        """The lines of a plain shard file between pairs of byte offsets at line starts, range
        after range, as vectors: read in blocks of `BLOCK_BYTES`
        (`tf.data.FixedLengthRecordDataset` from the offset), each block's last part carried
        over to the next (a range ends at a line start, so nothing is carried across ranges)."""
        path = tf.gather(tf.constant([str(p) for p in paths]), shard)
        sizes = tf.constant([marks[side][-1] for marks in self.files.marks], tf.int64)
        size = tf.gather(sizes, shard)
        blocks = None
        for start, end in ranges:
            length = end - start
            full = length // BLOCK_BYTES
            rest = length - full * BLOCK_BYTES
            last = start + full * BLOCK_BYTES  # nothing left when `rest` is 0: no record
            footer = size - start - full * BLOCK_BYTES
            more = tf.data.FixedLengthRecordDataset(
                path, BLOCK_BYTES, header_bytes=start, footer_bytes=footer
            ).concatenate(
                tf.data.FixedLengthRecordDataset(
                    path, tf.maximum(rest, 1), header_bytes=last, footer_bytes=size - end
                )
            )
            blocks = more if blocks is None else blocks.concatenate(more)

        def split(carry, block):
            # The op under `tf.strings.split`, without the ragged tensor that it builds around
            # the parts of one string: the same parts, a third of the tracing.
            joined = tf.reshape(tf.strings.join([carry, block]), [1])
            parts = tf.raw_ops.StringSplitV2(input=joined, sep="\n").values
            return parts[-1], tf.strings.regex_replace(parts[:-1], "\r$", "")

        # Blocks of lines: what is done to lines is done a block at a time. One scan for all
        # the ranges: each traced function costs its tracing, and its instantiation when the
        # pipeline runs.
        return blocks.scan(tf.constant(""), _graph(split))

    def _as_pairs(self, sources: tf.data.Dataset, targets: tf.data.Dataset | None, *, blocks: bool):
        """`(source, target)` pairs from the two sides' lines (`blocks`: vectors of lines), or
        from TSV lines (checked to hold two columns) when `targets` is None."""
        if targets is None and blocks:  # split a block at a time

            def columns(lines):
                return tuple(tf.unstack(tf.strings.split(lines, "\t", 1).to_tensor(), 2, axis=1))

            return sources.map(_graph(columns)).unbatch()
        if targets is None:
            return sources.map(
                _graph(lambda line: tuple(tf.unstack(tf.strings.split(line, "\t", 1), 2)))
            )
        if blocks:
            sources, targets = sources.unbatch(), targets.unbatch()
        return tf.data.Dataset.zip(sources, targets)

    def _read_shard(self, shard) -> tf.data.Dataset:
        files = self.files
        targets = None if files.is_tsv else self._text_lines(files.targets, shard)
        return self._as_pairs(self._text_lines(files.sources, shard), targets, blocks=False)

    def _read_piece(self, shard, first, last, turn):
        """A piece: the lines between marks `first` and `last` (indices into `_marks`), from
        mark `turn` to the end and then from its start."""
        marks = self._marks()

        def lines(paths, side):
            at = tf.constant(marks[side], tf.int64)
            ranges = ((at[turn], at[last]), (at[first], at[turn]))
            return self._byte_lines(paths, side, shard, ranges)

        files = self.files
        return self._as_pairs(
            lines(files.sources, 0), None if files.is_tsv else lines(files.targets, 1), blocks=True
        )

    def _marks(self) -> list[list[int]]:
        """The byte offsets of the marks of every shard, one list per side, shard after shard
        (a TSV corpus's target side: zeros)."""
        flat = [[], []]
        for marks in self.files.marks:
            flat[0] += marks[0]
            flat[1] += marks[1] if len(marks) > 1 else [0] * len(marks[0])
        return flat

    def _pieces(self) -> tuple[np.ndarray, ...]:
        """Each piece's shard and first and last mark (indices into `_marks`): pieces of
        `piece_lines` lines, at marks."""
        per_piece = max(1, self.piece_lines // self.files.mark_lines)
        rows, base = [], 0
        for shard, marks in enumerate(self.files.marks):
            segments = len(marks[0]) - 1
            for first in range(0, segments, per_piece):
                rows.append((shard, base + first, base + min(first + per_piece, segments)))
            base += len(marks[0])
        return tuple(np.array(column, np.int64) for column in zip(*rows))

    def pairs(self) -> tf.data.Dataset:
        """The pairs in file order, shard after shard."""
        shards = tf.data.Dataset.range(len(self.files.lines))
        return shards.flat_map(_graph(self._read_shard))

    def piece_count(self) -> int:
        """How many pieces a pass reads (a corpus with a gzip file: its shards)."""
        if self.files.marks is None:
            return len(self.files.lines)
        return len(self._pieces()[0])

    def shuffled(self, seed, *, shuffle_buffer: int, shard: Shard = WHOLE) -> tf.data.Dataset:
        """One pass over every pair, in an order drawn from `seed` (shape ``(2,)``, a tensor
        too: an endless stream passes its pass number in it); with `shard`, this worker's part
        of it (its pieces, or its lines when there are fewer pieces than workers)."""
        shard = Shard(*shard)
        if shard.count > 1 and self.piece_count() < shard.count:
            return by_line(self.shuffled(seed, shuffle_buffer=shuffle_buffer), shard)
        order_seed, shuffle_seed, turn_seed = tf.unstack(_pair_seeds(seed))
        if self.files.marks is not None:
            shards, first, last = self._pieces()
            # Each piece turned to start at a random mark, so that a pass read in part (a
            # corpus weighted below its size) reads other lines of each piece each time.
            draw = tf.random.stateless_uniform([len(shards)], turn_seed, dtype=tf.float64)
            turn = first + tf.cast(draw * tf.cast(last - first, tf.float64), tf.int64)
            pieces, read = (shards, first, last, turn), self._read_piece
        else:  # gzip files: whole shards
            pieces, read = (np.arange(len(self.files.lines), dtype=np.int64),), self._read_shard
        # This worker's pieces: every `count`-th from its `index` (all of them for one worker).
        pieces = tuple(column[shard.index :: shard.count] for column in pieces)
        count = len(pieces[0])
        order = tf.random.experimental.stateless_shuffle(tf.range(count), order_seed)
        ordered = tf.data.Dataset.from_tensor_slices(tuple(tf.gather(c, order) for c in pieces))
        lines = ordered.interleave(
            _graph(read),
            cycle_length=min(count, CYCLE),
            block_length=1,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        shuffled = window_shuffle(lines, shuffle_buffer, shuffle_seed)
        return shuffled if shard.count == 1 else without_auto_shard(shuffled)


@dataclasses.dataclass(frozen=True)
class DatasetCorpus:
    """A corpus held as a dataset (the built-in corpora, TFDS): it is small, so a window of
    `shuffle_buffer` pairs usually holds it whole."""

    dataset: tf.data.Dataset
    size: int

    def pairs(self) -> tf.data.Dataset:
        return self.dataset

    def shuffled(self, seed, *, shuffle_buffer: int, shard: Shard = WHOLE) -> tf.data.Dataset:
        """One pass in an order drawn from `seed` (shape ``(2,)``); with `shard`, this worker's
        lines of it (the corpus is held, so there are no pieces to split)."""
        return by_line(window_shuffle(self.dataset, min(shuffle_buffer, self.size), seed), shard)


def endless(corpus, seed, *, shuffle_buffer: int, shard: Shard = WHOLE) -> tf.data.Dataset:
    """Pass after pass of `corpus` (a `FileCorpus` or `DatasetCorpus`), each in its own order:
    pass k is `corpus.shuffled((seed, k))` (with `shard`, this worker's part of it). `seed` may
    be a tensor."""
    seed = tf.cast(seed, tf.int64)

    def one_pass(k):
        return corpus.shuffled(tf.stack([seed, k]), shuffle_buffer=shuffle_buffer, shard=shard)

    return tf.data.Dataset.range(2**62).flat_map(_graph(one_pass))
