"""The cache layouts of one-token decoding (`cache_layout.CacheLayout`), the fastest in graph mode
and under XLA (`backends.litert.layout`: LiteRT's). A search reorders their rows."""

from __future__ import annotations

import functools

import tensorflow as tf

from tf_transformer.layers.attention import MatmulKernels
from tf_transformer.layers.cache_layout import LayerCache

# XLA:CPU splits a reduction over an axis longer than this (TreeReductionRewriter's window).
REDUCE_WINDOW = 32
_maximum = functools.partial(functools.reduce, tf.maximum)  # of a list of tensors
# `GraphLayout.write`'s strided-slice update: the position one index (shrunk), the rest whole.
_AT_POSITION = {"begin_mask": 0b10111, "end_mask": 0b10111, "shrink_axis_mask": 0b01000}


class GraphLayout(MatmulKernels):
    """Per-head caches `(rows, 1, heads, len, depth)`, memory keys/values `(batch, 1, heads,
    src_len, depth)`, attention as `BatchMatMulV3` (oneDNN's `BatchMatMulV2` and `Softmax` cost
    ~40 µs each at one row: docs/benchmarks/decoding.md, "oneDNN at one-row sizes")."""

    def __init__(self, num_heads: int, d_model: int):
        self.num_heads, self.d_model, self.depth = num_heads, d_model, d_model // num_heads

    def arrange(self, columns):
        return columns

    def memory(self, projected, batch, count: int):
        shape = (batch, -1, 1, count, self.num_heads, self.depth)
        # One transpose for every layer's keys and values: (count, batch, 1, heads, src, depth).
        return tf.unstack(tf.transpose(tf.reshape(projected, shape), (3, 0, 2, 4, 1, 5)), count)

    def empty(self, batch, length, dtype):
        zeros = tf.zeros((batch, 1, self.num_heads, length, self.depth), dtype)
        return LayerCache(zeros, zeros)

    def write(self, storage, x, step):  # in place (a scatter copies the cache)
        at = tf.cast(step, tf.int32) * [0, 0, 0, 1, 0]
        value = tf.reshape(x, (-1, 1, self.num_heads, self.depth))
        return tf.raw_ops.TensorStridedSliceUpdate(
            input=storage, begin=at, end=at, strides=[1] * 5, value=value, **_AT_POSITION
        )

    def read(self, q, keys, values, bias, group):  # the result's heads are contiguous
        return tf.reshape(q, (-1, group, self.num_heads, 1, self.depth)), keys, values, bias

    def output_kernel(self, table, dtype):
        return None

    def scores(self, q, k):
        return _batch_matmul(q, k, adj_y=True)

    def weigh(self, weights, v):
        return _batch_matmul(tf.cast(weights, v.dtype), v)


class XlaLayout(GraphLayout):
    """Heads merged: self-attention cache `(rows, len, d_model)`, memory keys/values `(batch, 1,
    src_len, d_model)`. XLA:CPU runs each row and head's `(1, depth) x (depth, len)` product as
    its own small dot, so the kernels are products and sums it fuses into vectorized loops: query
    and key columns depth-major (`arrange`), heads last (the vector lanes), float32 for half
    types, normalised after the weighted sum, a length over `REDUCE_WINDOW` as two axes
    (`_length_dims`; docs/benchmarks/decoding.md, "The XLA step layout")."""

    normalise_after = True

    def arrange(self, columns):
        """Head-major columns `(..., heads * depth)` -> depth-major `(..., depth * heads)`."""
        rank, shape = len(columns.shape), tf.shape(columns)
        split = tf.reshape(columns, tf.concat([shape[:-1], [self.num_heads, -1]], axis=0))
        return tf.reshape(tf.transpose(split, [*range(rank - 1), rank, rank - 1]), shape)

    def memory(self, projected, batch, count: int):
        shape = (batch, 1, -1, count, self.d_model)
        return tf.unstack(tf.reshape(projected, shape), num=count, axis=3)

    def empty(self, batch, length, dtype):
        zeros = tf.zeros((batch, length, self.d_model), dtype)
        return LayerCache(zeros, zeros)

    def write(self, storage, x, step):  # XLA compiles a strided-slice update's begin as constant
        slots = tf.range(tf.shape(x)[0])[:, tf.newaxis] * [1, 0] + tf.cast(step, tf.int32) * [0, 1]
        return tf.tensor_scatter_nd_update(storage, slots, x)  # [row, step]

    def read(self, q, keys, values, bias, group):
        # Queries (batch, group, 1.., depth, heads), keys (batch, 1, len.., depth, heads), values
        # (batch, 1, len.., heads, depth).
        dims = _length_dims(keys, len(keys.shape) - 2)
        q = tf.reshape(q, (-1, group, *[1] * len(dims), self.depth, self.num_heads))
        keys = tf.reshape(keys, (-1, 1, *dims, self.depth, self.num_heads))
        values = tf.reshape(values, (-1, 1, *dims, self.num_heads, self.depth))
        return q, keys, values, tf.reshape(bias, (-1, 1, *dims, 1))

    def output_kernel(self, table, dtype):  # XLA:CPU's `transpose_b` at 4 rows: beam 4 1.24x
        return tf.transpose(tf.cast(table, dtype))

    def scores(self, q, k):
        dtype = tf.float32 if q.dtype in (tf.float16, tf.bfloat16) else q.dtype
        return tf.reduce_sum(tf.cast(q, dtype) * tf.cast(k, dtype), axis=-2)  # (.., len.., heads)

    def peak(self, logits):  # (.., 1.., heads)
        return _over_length(logits, tf.reduce_max, _maximum, len(logits.shape) - 3, axis=-2)

    def total(self, exp):  # (.., 1.., heads, 1)
        return _over_length(exp, tf.reduce_sum, tf.add_n, len(exp.shape) - 3, axis=-2)[..., None]

    def weigh(self, weights, v):  # (.., 1.., heads, depth)
        products = weights[..., tf.newaxis] * tf.cast(v, weights.dtype)  # (.., len.., heads, d)
        return _over_length(products, tf.reduce_sum, tf.add_n, len(v.shape) - 4, axis=-3)


def _batch_matmul(x, y, *, adj_y=False):
    if x.dtype == tf.float16:  # BatchMatMulV3 has no float16 CPU kernel (and oneDNN no float16)
        return tf.matmul(x, y, adjoint_b=adj_y)
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype, adj_y=adj_y)


def _length_dims(x, axis: int) -> list:
    """`x`'s `axis` as one axis, or two of at most `REDUCE_WINDOW` when static, longer and so
    divisible (see `XlaLayout`)."""
    length = x.shape[axis]
    if length is None:
        return [tf.shape(x)[axis]]
    if length > REDUCE_WINDOW:
        for inner in range(REDUCE_WINDOW, 1, -1):
            if length % inner == 0 and length // inner <= REDUCE_WINDOW:
                return [length // inner, inner]
    return [length]


def _over_length(x, reduce, combine, length_axes: int, *, axis: int):
    """`reduce` over the length axes (`axis`, and with two the one before), kept as size 1, as
    XLA:CPU vectorizes it: over the inner axis, then `combine` of the outer one's slices (a
    `reduce` over both is a scalar loop)."""
    x = reduce(x, axis=axis, keepdims=True)
    if length_axes == 2:
        return combine(tf.split(x, x.shape[axis - 1], axis=axis - 1))
    return x
