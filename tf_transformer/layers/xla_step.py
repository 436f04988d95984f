"""The one-token attention steps for XLA: heads merged in the caches, attention as multiply + reduce.

`MultiHeadAttention.self_attention_step` / `cross_attention_step` (the "graph" layout) keep a
`(rows, heads, cache_len, depth)` cache and run per-(row, head) batched matmuls: cheap in graph
mode, but XLA on a CPU runs each `(1, depth) x (depth, len)` product as its own small dot (32
per attention at 4 rows and 8 heads, ~1 µs each) and writes a position as `rows * heads` scatter
slices. The "xla" layout keeps the self-attention cache as `(rows, cache_len, d_model)`, the heads
merged: a position is one `d_model` slice per row (one scatter index per row) and beam search
reorders whole rows. Attention for the one query is written as products and sums, which XLA
fuses into a few vectorized loops (no dot, no temporary the size of the cache):

* scores `s[r, t, h] = sum_d q[r, d, h] k[r, t, d, h]`: the query and key columns are stored
  depth-major, `(depth, heads)` (`heads_minor`, applied to their kernels once per decoding call),
  so the sum runs over a major axis and the heads are the vector lanes (XLA:CPU leaves a sum over
  the minor axis scalar);
* softmax over `t` in float32, then `out[r, h, d] = sum_t w[r, t, h] v[r, t, h, d]` (values
  keep their head-major layout, so the output projection is unchanged);
* a length over 32 is viewed as two axes of at most 32 (`_length_dims`): XLA:CPU's
  TreeReductionRewriter splits longer reductions into a reduce-window and a reduce, which
  stops the product fusing into the sum and writes the `(rows, len, heads, depth)` product out.

The same math as the graph layout; both run anywhere (`make_decode_fn(jit_compile=True)` picks
this one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import tensorflow as tf

from tf_transformer.layers.attention import MultiHeadAttention, dense_step

# XLA:CPU splits a reduction over an axis longer than this (TreeReductionRewriter's window).
REDUCE_WINDOW = 32


def heads_minor(x, num_heads: int):
    """Reorders the last axis of `x` `(..., heads * depth)` from head-major (as the projections
    write it) to depth-major `(..., depth * heads)`: the layout of the queries and keys here."""
    rank = len(x.shape)
    split = tf.reshape(x, tf.concat([tf.shape(x)[:-1], [num_heads, -1]], axis=0))
    return tf.reshape(tf.transpose(split, [*range(rank - 1), rank, rank - 1]), tf.shape(x))


def step_weights(mha: MultiHeadAttention, *, fuse_qkv: bool) -> dict[str, tf.Tensor]:
    """`mha.step_weights` with the query and key columns depth-major (`heads_minor`)."""
    weights = mha.step_weights(fuse_qkv=fuse_qkv)
    heads = mha.num_heads
    if fuse_qkv:
        for name in ("qkv_kernel", "qkv_bias"):
            q, k, v = tf.split(weights[name], 3, axis=-1)
            weights[name] = tf.concat([heads_minor(q, heads), heads_minor(k, heads), v], axis=-1)
    else:
        for name in ("query_kernel", "query_bias"):
            weights[name] = heads_minor(weights[name], heads)
    return weights


def self_attention_step(mha: MultiHeadAttention, x, weights, cache, slot, bias, history=None):
    """`MultiHeadAttention.self_attention_step` on a heads-merged cache.

    Args:
      mha: the layer (for its sizes).
      x: `(rows, d_model)` the position's input.
      weights: `step_weights(mha, fuse_qkv=True)`.
      cache: `{"key", "value"}`, each `(rows, cache_len, d_model)`; keys depth-major.
      slot: int32 `(rows, 2)` scatter indices `[row, position]`.
      bias: additive `(cache_len,)`: 0 up to the position, a large negative after it.
      history: None (row `r`'s positions are in row `r`), or int32 `(rows, cache_len, 2)`:
        `[cache row, position]` where each row's earlier positions were written (beam search
        without moving the cache: `SplitCache.in_place`). The gather fuses into the scores.

    Returns:
      `(output, cache)`: `(rows, d_model)` and the cache with this position written.
    """
    qkv = dense_step(x, weights["qkv_kernel"], weights["qkv_bias"])  # (rows, 3 d_model)
    q, k, v = tf.split(qkv, 3, axis=1)  # (rows, d_model) each
    cache = {
        "key": tf.tensor_scatter_nd_update(cache["key"], slot, k),
        "value": tf.tensor_scatter_nd_update(cache["value"], slot, v),
    }
    key, value = cache["key"], cache["value"]
    if history is not None:
        key, value = tf.gather_nd(key, history), tf.gather_nd(value, history)
    dims = _length_dims(key, 1)  # cache_len, as axes of at most 32
    heads, depth = mha.num_heads, mha.depth
    q = tf.reshape(q, (-1, *[1] * len(dims), depth, heads))
    keys = tf.reshape(key, (-1, *dims, depth, heads))
    values = tf.reshape(value, (-1, *dims, heads, depth))
    attended = _attend(q, keys, values, tf.reshape(bias, (*dims, 1)), len(dims))
    attended = tf.reshape(attended, (-1, mha.d_model))  # (rows, heads * depth)
    return dense_step(attended, weights["output_kernel"], weights["output_bias"]), cache


def cross_attention_step(mha: MultiHeadAttention, x, weights, key, value, bias, *, beam_size=1):
    """`MultiHeadAttention.cross_attention_step` over heads-merged, per-sentence keys/values.

    Args:
      mha: the layer (for its sizes).
      x: `(batch * beam_size, d_model)`, sentence-major (row `b * beam_size + i`).
      weights: `step_weights(mha, fuse_qkv=False)`.
      key, value: `(batch, 1, src_len, d_model)`, once per sentence (keys depth-major); the
        beam axis of 1 broadcasts over the beams (nothing is tiled per beam).
      bias: additive `(batch, 1, 1, 1, src_len)` (source padding).
      beam_size: rows per sentence.

    Returns:
      `(batch * beam_size, d_model)`.
    """
    q = dense_step(x, weights["query_kernel"], weights["query_bias"])
    dims = _length_dims(key, 2)
    heads, depth = mha.num_heads, mha.depth
    # A sentence's beams `(batch, beam, 1.., depth, heads)` against its keys `(batch, 1, src..)`.
    q = tf.reshape(q, (-1, beam_size, *[1] * len(dims), depth, heads))
    keys = tf.reshape(key, (-1, 1, *dims, depth, heads))
    values = tf.reshape(value, (-1, 1, *dims, heads, depth))
    bias = tf.reshape(bias, (-1, 1, *dims, 1))
    attended = _attend(q, keys, values, bias, len(dims))  # (batch, beam, heads, depth)
    attended = tf.reshape(attended, (-1, mha.d_model))
    return dense_step(attended, weights["output_kernel"], weights["output_bias"])


def _length_dims(x, axis: int) -> list:
    """The length of `x`'s `axis` as one axis, or as two of at most `REDUCE_WINDOW` (see the
    module docstring) when it is static, longer, and so divisible."""
    length = x.shape[axis]
    if length is None:
        return [tf.shape(x)[axis]]
    if length > REDUCE_WINDOW:
        for inner in range(REDUCE_WINDOW, 1, -1):
            if length % inner == 0 and length // inner <= REDUCE_WINDOW:
                return [length // inner, inner]
    return [length]


def _attend(q, k, v, bias, length_axes: int):
    """`softmax(q k^T + bias) v` for one query per head, as products and sums.

    Args:
      q: `(..., 1.., depth, heads)` pre-scaled queries (`length_axes` ones).
      k: `(..., len.., depth, heads)`; `v`: `(..., len.., heads, depth)`.
      bias: additive, broadcastable to `(..., len.., heads)`.
      length_axes: how many axes the length is split into (1 or 2).

    Returns:
      `(..., heads, depth)` in `v`'s dtype. Sums and softmax run in float32 for half types (as
      a matmul accumulates and TF's Softmax kernel computes).
    """
    dtype = tf.float32 if q.dtype in (tf.float16, tf.bfloat16) else q.dtype
    q, k, bias = tf.cast(q, dtype), tf.cast(k, dtype), tf.cast(bias, dtype)
    logits = tf.reduce_sum(q * k, axis=-2) + bias  # (..., len.., heads)
    peak = _over_length(logits, tf.reduce_max, _maximum, length_axes, axis=-2)  # (..., heads)
    for _ in range(length_axes):
        peak = peak[..., tf.newaxis, :]
    exp = tf.exp(logits - peak)
    products = exp[..., tf.newaxis] * tf.cast(v, dtype)  # (..., len.., heads, depth)
    attended = _over_length(products, tf.reduce_sum, tf.add_n, length_axes, axis=-3)
    # Normalised after the sum: `(heads, depth)` divisions instead of `(len, heads)`.
    total = _over_length(exp, tf.reduce_sum, tf.add_n, length_axes, axis=-2)  # (..., heads)
    return tf.cast(attended / total[..., tf.newaxis], v.dtype)


def _over_length(x, reduce, combine, length_axes: int, *, axis: int):
    """`reduce` over the length axes `axis - length_axes + 1 .. axis` of `x`, as XLA:CPU
    vectorizes it: one `reduce` over the inner axis (at most 32 long: unrolled, vectorized over
    the axes after it), then `combine` of the slices along the outer one (one `reduce` over two
    axes is a scalar loop, and XLA merges two consecutive reduces into one)."""
    x = reduce(x, axis=axis)
    return combine(tf.unstack(x, axis=axis)) if length_axes == 2 else x


def _maximum(tensors):
    return functools.reduce(tf.maximum, tensors)


class StepLayout(NamedTuple):
    """A cache layout's one-token attention functions (the same signatures in each)."""

    step_weights: Callable  # (mha, *, fuse_qkv) -> weights
    # (mha, x, weights, cache, slot, bias[, history]) -> (out, cache); history: "xla" only
    self_attention_step: Callable
    cross_attention_step: Callable  # (mha, x, weights, key, value, bias, *, beam_size) -> out


STEP_LAYOUTS = {
    "graph": StepLayout(
        MultiHeadAttention.step_weights,
        MultiHeadAttention.self_attention_step,
        MultiHeadAttention.cross_attention_step,
    ),
    "xla": StepLayout(step_weights, self_attention_step, cross_attention_step),
}
