"""The key/value cache layouts of one-token decoding: how a position is stored, written, read.

Each is a `cache_layout.CacheLayout`; `MultiHeadAttention.call(..., cache=...)` runs the same
projections and `scaled_dot_product_attention` for each, with the layout's `kernels`.

* `GraphLayout` (the fastest in graph mode): per-head caches, a position written as
  `rows * heads` scatter slices, attention as batched matmuls.
* `XlaLayout` (the fastest under XLA): heads merged, a position written as one slice per row
  (beam search leaves it in place and reads through a row table, `history`, where XLA compiles
  for AVX-512; elsewhere it reorders the cache, see `XlaLayout.in_place_beams`). XLA:CPU runs each
  row and head's `(1, depth) x (depth, len)` product as its own small dot, so attention is
  products and sums fused into a few vectorized loops: query and key columns are depth-major
  (`arrange`, on the kernels once per call), so score sums run over a major axis with the heads
  as vector lanes; a length over 32 is viewed as two axes of at most 32 (`_length_dims`), else
  XLA:CPU's TreeReductionRewriter splits the reduction and the product stops fusing into the sum.
* `layers.litert_layout.LiteRTLayout` (the LiteRT export's step): `GraphLayout`'s storage, a
  position written with one dynamic update slice.
"""

from __future__ import annotations

import dataclasses
import functools

import tensorflow as tf

from tf_transformer.hardware.cpu import cpu_features
from tf_transformer.layers.attention import MatmulKernels
from tf_transformer.layers.cache_layout import KVCache

# XLA:CPU splits a reduction over an axis longer than this (TreeReductionRewriter's window).
REDUCE_WINDOW = 32
_maximum = functools.partial(functools.reduce, tf.maximum)  # of a list of tensors


class GraphLayout:
    """Per-head caches and batched matmuls: self-attention cache `(rows, 1, heads, len, depth)`,
    memory keys/values `(batch, 1, heads, src_len, depth)`, slots `[row, 0, head, position]`.

    With oneDNN on (TensorFlow's default on x86), `BatchMatMulV2` and `Softmax` become oneDNN
    primitives costing ~40 µs each at these sizes (measured; 12 of them made most of a 2 ms
    step): the kernels are `BatchMatMulV3` (Eigen, a few µs) and attention reads no weights
    (`scaled_dot_product_attention(return_weights=False)`: no Softmax op).
    """

    compiled = False

    def __init__(self, num_heads: int, d_model: int):
        self.num_heads, self.d_model, self.depth = num_heads, d_model, d_model // num_heads
        self.kernels = BatchMatmulKernels()

    def arrange(self, columns):
        """The order of query and key columns the layout reads (here: as projected)."""
        return columns

    def storage(self, rows, length, dtype):
        """One layer's zero key (or value) storage."""
        return tf.zeros((rows, 1, self.num_heads, length, self.depth), dtype)

    def empty(self, batch, length, dtype, num_layers, beam_size=1):
        zeros = self.storage(batch, length, dtype)
        tables = {"slots": self.slots(batch * beam_size, length)}
        return KVCache([(zeros, zeros)] * num_layers, tables=tables)

    def memory(self, projected, batch, count: int):
        """`(batch * src_len, count * d_model)` projected keys/values -> `count` memories."""
        shape = (batch, -1, 1, count, self.num_heads, self.depth)
        # One transpose for every layer's keys and values: (count, batch, 1, heads, src, depth).
        return tf.unstack(tf.transpose(tf.reshape(projected, shape), (3, 0, 2, 4, 1, 5)), count)

    def slots(self, rows, length):
        """int32 `(length, rows, heads, 4)`: row `t` holds the indices that write position `t`."""
        row, head = tf.meshgrid(tf.range(rows), tf.range(self.num_heads), indexing="ij")
        shape = (length, rows, self.num_heads)
        position = tf.reshape(tf.range(length), (length, 1, 1))
        parts = [row, tf.zeros_like(row), head, position]
        return tf.stack([tf.broadcast_to(p, shape) for p in parts], axis=-1)

    def locate(self, cache, step):
        """The step's scatter indices (a row of `slots`)."""
        return cache, tf.gather(cache.tables["slots"], step)

    def write(self, storage, x, where):
        """`x` `(rows, d_model)` written into `storage` at `where` (in place under XLA)."""
        return tf.tensor_scatter_nd_update(
            storage, where, tf.reshape(x, (-1, self.num_heads, self.depth))
        )

    def read(self, q, keys, values, bias, group, where=None):
        """Queries `(batch, group, heads, 1, depth)` against keys/values `(batch, 1, heads,
        len, depth)`; the result's heads are contiguous (no transpose back)."""
        return tf.reshape(q, (-1, group, self.num_heads, 1, self.depth)), keys, values, bias


class XlaLayout(GraphLayout):
    """Heads merged, attention as products and sums (module docstring): self-attention cache
    `(rows, len, d_model)`, memory keys/values `(batch, 1, src_len, d_model)`, keys depth-major,
    scatter slots `[row, position]`.

    With beams, `in_place_beams` decides how the hypotheses keep their history. True: the cache
    is written in place (`KVCache`), each hypothesis's position into its own row, and reads
    gather through a row table. False: beam search reorders the cache rows at every step, as in
    graph mode. The table's gather (per row and position) costs little where XLA compiles
    for AVX-512 and much more where it compiles for AVX2: beam 4 against greedy at 128 tokens
    (tutorial model, AMD EPYC with AVX-512, one process, docs/benchmarks/decoding.md "Beam
    search") measured 2.36x through the table and 2.54x reordered; with XLA limited to AVX2
    (`XLA_FLAGS=--xla_cpu_max_isa=AVX2`) 4.06x and 2.71x. So the default is the table where XLA compiles
    for AVX-512 (`CpuFeatures.xla_avx512`: the CPU has it and XLA_FLAGS allows it), the
    reorder elsewhere. The choice is made in Python, when the decoding is traced: an XLA
    SavedModel export keeps the choice of the machine that exported it.
    """

    compiled = True

    def __init__(self, num_heads: int, d_model: int, *, in_place_beams: bool | None = None):
        super().__init__(num_heads, d_model)
        self.kernels = ProductsAndSums()
        if in_place_beams is None:
            in_place_beams = cpu_features().xla_avx512
        self.in_place_beams = in_place_beams

    def arrange(self, columns):
        """Head-major columns `(..., heads * depth)` -> depth-major `(..., depth * heads)`."""
        rank, shape = len(columns.shape), tf.shape(columns)
        split = tf.reshape(columns, tf.concat([shape[:-1], [self.num_heads, -1]], axis=0))
        return tf.reshape(tf.transpose(split, [*range(rank - 1), rank, rank - 1]), shape)

    def storage(self, rows, length, dtype):
        return tf.zeros((rows, length, self.d_model), dtype)

    def empty(self, batch, length, dtype, num_layers, beam_size=1):
        cache = super().empty(batch, length, dtype, num_layers, beam_size)
        if beam_size == 1 or not self.in_place_beams:
            return cache
        # `rows`, set as positions are written: the row that holds each position of each
        # hypothesis.
        rows = batch * beam_size
        positions = tf.range(length)
        tables = {
            **cache.tables,
            "positions": positions,
            "row_ids": tf.range(rows)[:, tf.newaxis],  # (rows, 1)
            "position_grid": tf.broadcast_to(positions, [rows, length]),
        }
        origin = tf.zeros([batch, length], tf.int32)
        return KVCache(cache.layers, rows=origin, tables=tables, in_place=True)

    def memory(self, projected, batch, count: int):
        shape = (batch, 1, -1, count, self.d_model)
        return tf.unstack(tf.reshape(projected, shape), num=count, axis=3)

    def slots(self, rows, length):
        row = tf.broadcast_to(tf.range(rows), (length, rows))
        position = tf.broadcast_to(tf.range(length)[:, tf.newaxis], (length, rows))
        return tf.stack([row, position], axis=-1)  # (length, rows, 2)

    def locate(self, cache, step):
        """The step's scatter indices and, written in place, each row's `[cache row, position]`
        of its earlier positions, `(rows, len, 2)` (this step's row writes `step`)."""
        tables = cache.tables
        slot = tf.gather(tables["slots"], step)
        if not cache.in_place:
            return cache, (slot, None)
        origin = tf.where(tf.equal(tables["positions"], step), tables["row_ids"], cache.rows)
        history = tf.stack([origin, tables["position_grid"]], axis=-1)
        return dataclasses.replace(cache, rows=origin), (slot, history)

    def write(self, storage, x, where):
        return tf.tensor_scatter_nd_update(storage, where[0], x)

    def read(self, q, keys, values, bias, group, where=None):
        """A sentence's queries `(batch, group, 1.., depth, heads)` against its keys `(batch, 1,
        len.., depth, heads)` and values `(batch, 1, len.., heads, depth)`."""
        if where is not None and where[1] is not None:
            keys, values = (tf.gather_nd(t, where[1]) for t in (keys, values))
        length_axis = len(keys.shape) - 2  # the self-attention cache has no group axis
        dims = _length_dims(keys, length_axis)
        q = tf.reshape(q, (-1, group, *[1] * len(dims), self.depth, self.num_heads))
        keys = tf.reshape(keys, (-1, 1, *dims, self.depth, self.num_heads))
        values = tf.reshape(values, (-1, 1, *dims, self.num_heads, self.depth))
        bias = tf.reshape(bias, (-1, 1, *dims, 1))
        return q, keys, values, bias


LAYOUTS = {"graph": GraphLayout, "xla": XlaLayout}


class BatchMatmulKernels(MatmulKernels):
    """`MatmulKernels` as `BatchMatMulV3` (see `GraphLayout`)."""

    def scores(self, q, k):
        return _batch_matmul(q, k, adj_y=True)

    def weigh(self, weights, v):
        return _batch_matmul(tf.cast(weights, v.dtype), v)


class ProductsAndSums:
    """The kernels for `XlaLayout.read`'s shapes: products and sums over the length axes (one,
    or two of at most `REDUCE_WINDOW`), heads last (the vector lanes); float32 for half types.
    Normalised after the weighted sum: `(heads, depth)` divisions instead of `(len, heads)`."""

    normalise_after = True

    def scores(self, q, k):
        dtype = tf.float32 if q.dtype in (tf.float16, tf.bfloat16) else q.dtype
        return tf.reduce_sum(tf.cast(q, dtype) * tf.cast(k, dtype), axis=-2)  # (.., len.., heads)

    def peak(self, logits):
        length_axes = len(logits.shape) - 3
        peak = _over_length(logits, tf.reduce_max, _maximum, length_axes, axis=-2)  # (.., heads)
        for _ in range(length_axes):
            peak = peak[..., tf.newaxis, :]
        return peak

    def total(self, exp):
        total = _over_length(exp, tf.reduce_sum, tf.add_n, len(exp.shape) - 3, axis=-2)
        return total[..., tf.newaxis]  # (.., heads, 1)

    def weigh(self, weights, v):
        products = weights[..., tf.newaxis] * tf.cast(v, weights.dtype)  # (.., len.., heads, d)
        return _over_length(products, tf.reduce_sum, tf.add_n, len(v.shape) - 4, axis=-3)


def _batch_matmul(x, y, *, adj_y=False):
    if x.dtype == tf.float16:  # BatchMatMulV3 has no float16 CPU kernel (and oneDNN no float16)
        return tf.matmul(x, y, adjoint_b=adj_y)
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype, adj_y=adj_y)


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


def _over_length(x, reduce, combine, length_axes: int, *, axis: int):
    """`reduce` over `x`'s length axes (`axis` and, with two, the one before), as XLA:CPU
    vectorizes it: `reduce` over the inner axis (unrolled, vectorized over the later axes), then
    `combine` of the outer one's slices (a `reduce` over both, or two in turn, is a scalar loop)."""
    x = reduce(x, axis=axis)
    return combine(tf.unstack(x, axis=axis)) if length_axes == 2 else x
