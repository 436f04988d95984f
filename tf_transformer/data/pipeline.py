"""The tf.data pipeline: tokenize pairs, bound their length, batch by token budget with bucketing.

Every batch is ``((src, tgt_in), tgt_out)``: int64 ``(batch, len)`` tensors padded with 0
(``[PAD]``), where ``tgt_in = tgt[:-1]`` and ``tgt_out = tgt[1:]``. The same dataset serves a custom
training loop and ``model.fit``.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.text.special_tokens import PAD_ID

_TOKENIZE_BATCH = 1024


def _truncate(ids: tf.Tensor, length: int) -> tf.Tensor:
    """Cuts `ids` to at most `length` tokens, keeping its last token ([END]) at the end."""
    keep = tf.minimum(tf.size(ids), length) - 1
    return tf.concat([ids[:keep], ids[-1:]], axis=0)


def prepare_examples(
    pairs_ds: tf.data.Dataset,
    tokenizers,
    *,
    max_tokens: int = 128,
    drop_long: bool = False,
    shuffle: bool = True,
    shuffle_buffer: int = 20000,
    seed: int | None = None,
    cache: bool = True,
) -> tf.data.Dataset:
    """Tokenizes ``(source, target)`` pairs into unbatched ``((src, tgt_in), tgt_out)`` examples.

    Args:
        pairs_ds: scalar ``tf.string`` ``(source, target)`` pairs (e.g. from `load_dataset`).
        tokenizers: a `Tokenizers` (or its reloaded SavedModel) with ``.source`` and ``.target``.
        max_tokens: the longest ``src``, ``tgt_in`` and ``tgt_out`` in tokens ([START]/[END]
            included); ``tgt`` may thus hold ``max_tokens + 1`` tokens before the shift.
        drop_long: drop pairs past `max_tokens` instead of truncating them (truncation keeps
            [END] as the last token).
        shuffle: shuffle the examples (after the cache, so every epoch has a new order).
        shuffle_buffer: the shuffle buffer size.
        seed: the shuffle seed.
        cache: cache the tokenized examples in memory after the first pass.

    Returns:
        A dataset of ``((src, tgt_in), tgt_out)`` 1-D int64 tensors.
    """
    if max_tokens < 2:
        raise InvalidValueError(
            f"max_tokens must leave room for [START] and [END], got {max_tokens}"
        )

    # Graph code without Python control flow: AutoGraph would only re-read it (and what it calls)
    # each time a map is traced.
    @tf.autograph.experimental.do_not_convert
    def tokenize(source, target):
        return tokenizers.source.tokenize(source), tokenizers.target.tokenize(target)

    @tf.autograph.experimental.do_not_convert
    def fits(src, tgt):
        return (tf.size(src) <= max_tokens) & (tf.size(tgt) <= max_tokens + 1)

    @tf.autograph.experimental.do_not_convert
    def bound(src, tgt):
        return _truncate(src, max_tokens), _truncate(tgt, max_tokens + 1)

    @tf.autograph.experimental.do_not_convert
    def shift(src, tgt):
        return (src, tgt[:-1]), tgt[1:]

    ds = (
        pairs_ds.batch(_TOKENIZE_BATCH)
        .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()  # ragged rows become 1-D tensors
    )
    ds = ds.filter(fits) if drop_long else ds.map(bound, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(shift, num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds


def default_bucket_boundaries(max_tokens: int, *, first: int = 8, growth: float = 1.2) -> list[int]:
    """Roughly geometric bucket boundaries up to `max_tokens` (8, 12, 16, 20, 24, 28, 33, …)."""
    boundaries = []
    boundary = first
    while boundary <= max_tokens:
        boundaries.append(boundary)
        boundary = max(boundary + 4, int(boundary * growth))
    return boundaries


def bucket_batch_sizes(
    bucket_boundaries: list[int], max_tokens: int, token_budget: int
) -> tuple[list[int], list[int]]:
    """Per-bucket batch sizes so that batch size × longest length in the bucket ≤ budget.

    Bucket ``i`` holds lengths in ``[boundaries[i-1], boundaries[i])``; the last one holds
    ``[boundaries[-1], max_tokens]``.

    Returns:
        The boundaries kept (those ≤ `max_tokens`) and one batch size per bucket.

    Raises:
        ValueError: the boundaries are not increasing integers ≥ 2, or the budget cannot hold
            one `max_tokens` example.
    """
    if token_budget < max_tokens:
        raise InvalidValueError(
            f"token_budget {token_budget} cannot hold one example of max_tokens {max_tokens}"
        )
    kept = [int(b) for b in bucket_boundaries if b <= max_tokens]
    if any(b < 2 for b in kept) or any(a >= b for a, b in itertools.pairwise(kept)):
        raise InvalidValueError(f"bucket_boundaries must be increasing integers >= 2, got {kept}")
    longest = [b - 1 for b in kept] + [max_tokens]
    return kept, [token_budget // length for length in longest]


def make_batches(
    pairs_ds: tf.data.Dataset,
    tokenizers,
    *,
    max_tokens: int = 128,
    token_budget: int = 4096,
    drop_long: bool = False,
    shuffle: bool = True,
    shuffle_buffer: int = 20000,
    seed: int | None = None,
    cache: bool = True,
    bucket_boundaries: list[int] | None = None,
) -> tf.data.Dataset:
    """Batches by token budget, grouping examples of similar length into buckets.

    Each batch is padded to its own longest example, so batch size × padded length stays within
    `token_budget` for ``src`` and for ``tgt_in``/``tgt_out``.

    Args:
        pairs_ds: scalar ``tf.string`` ``(source, target)`` pairs.
        tokenizers: a `Tokenizers` (or its reloaded SavedModel).
        max_tokens: the longest sequence in tokens (see `prepare_examples`).
        token_budget: the most tokens (padding included) per batch and per side.
        drop_long: drop over-long pairs instead of truncating them.
        shuffle: shuffle examples before bucketing.
        shuffle_buffer: the shuffle buffer size.
        seed: the shuffle seed.
        cache: cache the tokenized examples in memory.
        bucket_boundaries: increasing length boundaries (default: `default_bucket_boundaries`).

    Returns:
        A prefetched dataset of ``((src, tgt_in), tgt_out)`` int64 ``(batch, len)`` batches.

    Example:
        >>> batches = make_batches(load_dataset("sample", "train"), tokenizers, token_budget=2048)
        >>> (src, tgt_in), tgt_out = next(iter(batches))
    """
    boundaries, batch_sizes = bucket_batch_sizes(
        bucket_boundaries or default_bucket_boundaries(max_tokens), max_tokens, token_budget
    )
    examples = prepare_examples(
        pairs_ds,
        tokenizers,
        max_tokens=max_tokens,
        drop_long=drop_long,
        shuffle=shuffle,
        shuffle_buffer=shuffle_buffer,
        seed=seed,
        cache=cache,
    )

    @tf.autograph.experimental.do_not_convert
    def length(inputs, tgt_out):
        src, tgt_in = inputs
        return tf.maximum(tf.size(src), tf.size(tgt_in))

    batches = examples.bucket_by_sequence_length(
        element_length_func=length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padding_values=((np.int64(PAD_ID), np.int64(PAD_ID)), np.int64(PAD_ID)),
    )
    return batches.prefetch(tf.data.AUTOTUNE)


def padded_batches(
    pairs_ds: tf.data.Dataset, tokenizers, *, batch_size: int = 64, **options
) -> tf.data.Dataset:
    """Plain fixed-size batches padded to their longest example (no bucketing).

    Args:
        pairs_ds: scalar ``tf.string`` ``(source, target)`` pairs.
        tokenizers: a `Tokenizers` (or its reloaded SavedModel).
        batch_size: examples per batch.
        **options: those of `prepare_examples` (`max_tokens`, `drop_long`, `shuffle`,
            `shuffle_buffer`, `seed`, `cache`), with its defaults.

    Returns:
        A prefetched dataset of ``((src, tgt_in), tgt_out)`` int64 ``(batch, len)`` batches.
    """
    examples = prepare_examples(pairs_ds, tokenizers, **options)
    return examples.padded_batch(batch_size).prefetch(tf.data.AUTOTUNE)


def padding_fraction(dataset: tf.data.Dataset) -> float:
    """The fraction of [PAD] tokens in ``src`` and ``tgt_out`` over all batches of `dataset`.

    ``tgt_in`` has the same padding as ``tgt_out`` and is not counted twice.
    """
    pads = total = 0
    for (src, _), tgt_out in dataset.as_numpy_iterator():
        pads += int(np.sum(src == PAD_ID)) + int(np.sum(tgt_out == PAD_ID))
        total += src.size + tgt_out.size
    return pads / total if total else 0.0
