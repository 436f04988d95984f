"""The decoding contract: how a cache layout stores, writes and reads keys and values.

Every layout runs the same projections and `scaled_dot_product_attention`; it only decides where
a position's key and value go and in which shapes they are read. `layers.kv_cache` holds "graph"
and "xla"; a new layout is one class with these members, built as `Layout(num_heads, d_model)`
(`tests/layers/test_cache_layout.py` writes one).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import tensorflow as tf


class LayerCache(NamedTuple):
    """One decoder layer's self-attention keys and values in a layout's shapes, one row per
    decoded sequence (a search tiles and reorders it as any nest of tensors)."""

    key: tf.Tensor
    value: tf.Tensor


class CacheLayout(Protocol):
    """How decoding stores the keys and values of the positions already decoded."""

    kernels: object  # `attention.MatmulKernels`' methods, for `read`'s shapes

    def arrange(self, columns: tf.Tensor) -> tf.Tensor:
        """Query and key projection columns `(..., d_model)` in the order `read` wants."""

    def memory(self, projected: tf.Tensor, batch: tf.Tensor, count: int) -> list[tf.Tensor]:
        """`(batch * src_len, count * d_model)` encoder keys/values -> `count` tensors (every
        layer's cross-attention key and value) as `read` takes them."""

    def empty(self, batch: tf.Tensor, length: int, dtype: tf.DType) -> LayerCache:
        """One layer's zero cache: `batch` rows of `length` positions."""

    def write(self, storage: tf.Tensor, x: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        """`storage` (a `LayerCache`'s key or value) with `x` `(rows, d_model)` written at
        position `step` (an int32 scalar)."""

    def read(self, q, keys, values, bias, group) -> tuple[tf.Tensor, ...]:
        """`(q, keys, values, bias)` in `kernels`' shapes, for `q` `(rows, d_model)` (scaled by
        `1 / sqrt(depth)` already), each `group` consecutive rows sharing one key/value row."""

    def output_kernel(self, table: tf.Variable, dtype: tf.DType) -> tf.Tensor | None:
        """A tied output projection's `(d_model, vocab)` kernel, made once per call; None: the
        steps multiply by the embedding table transposed."""
