"""The decoding contract: how a key/value cache layout stores, writes, reads and reorders.

A layout serves one decoding call (`Transformer.start_decoding` makes it). `MultiHeadAttention`
runs the same projections and the same `scaled_dot_product_attention` for every layout; the
layout only decides where a position's key and value go and in which shapes they are read.
`layers.kv_cache` holds the two layouts of this package ("graph" and "xla"); a new one is one
class with these methods (and a test, as `tests/layers/test_cache_layout.py` shows).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class KVCache:
    """The decoder's self-attention cache in a layout, with the layout's bookkeeping.

    Attributes:
      layers: one `(key, value)` per decoder layer, in the layout's shapes, `rows` first.
      rows: the layout's own tensors that follow the hypotheses (reordered with the beams), e.g.
        the "xla" layout's table of the row that holds each position of each hypothesis.
      tables: what the layout made once per call (write indices...): never tiled or reordered.
      in_place: beam search tiles `layers` per beam but never reorders them (only `rows`): a
        step writes each hypothesis's key and value into its own row and reads through `rows`.
    """

    layers: list[tuple[tf.Tensor, tf.Tensor]]
    rows: Any = ()
    tables: Any = ()
    in_place: bool = False

    def split(self) -> tuple[Any, Any]:
        """`(per_beam, in_place)`: what beam search reorders, and what it only tiles."""
        if self.in_place:
            return self.rows, self.layers
        return (self.layers, self.rows), ()

    def join(self, per_beam: Any, in_place: Any) -> KVCache:
        """The cache from `split`'s two parts (as the search loop carried them)."""
        if self.in_place:
            return dataclasses.replace(self, rows=per_beam, layers=in_place)
        layers, rows = per_beam
        return dataclasses.replace(self, layers=layers, rows=rows)


class AttentionKernels(Protocol):
    """The products and length reductions of `scaled_dot_product_attention`, in a layout's shapes.

    `attention.MatmulKernels` is the plain one (`tf.matmul`, reductions over the last axis).

    Attributes:
      normalise_after: divide the weighted values by `total` (True) rather than the weights.
    """

    normalise_after: bool

    def scores(self, q: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
        """`q k^T`: the logits, one per query and key position."""

    def peak(self, logits: tf.Tensor) -> tf.Tensor:
        """The largest logit over the key positions, broadcastable to `logits`."""

    def total(self, exp: tf.Tensor) -> tf.Tensor:
        """The sum over the key positions, broadcastable to `weigh`'s result."""

    def weigh(self, weights: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
        """`weights v`: the values summed over the key positions."""


class CacheLayout(Protocol):
    """How decoding stores the keys and values of the positions already decoded.

    Attributes:
      kernels: the `AttentionKernels` for the shapes `read` returns.
      compiled: the layout is meant for XLA-compiled decoding (`Transformer.start_decoding`
        then transposes a tied output projection's matrix once, as XLA:CPU wants it).

    A layout is built as `Layout(num_heads, d_model)`.
    """

    kernels: AttentionKernels
    compiled: bool

    def arrange(self, columns: tf.Tensor) -> tf.Tensor:
        """The order of query and key projection columns `(..., d_model)` the layout reads."""

    def memory(self, projected: tf.Tensor, batch: tf.Tensor, count: int) -> list[tf.Tensor]:
        """`(batch * src_len, count * d_model)` projected encoder keys/values -> `count`
        tensors (every layer's cross-attention key and value), as `read` takes them."""

    def empty(self, batch, length: int, dtype, num_layers: int, beam_size: int = 1) -> KVCache:
        """The step-0 cache for `batch` sentences and `length` positions (beam search tiles it
        to `batch * beam_size` rows), and the tables its steps read."""

    def locate(self, cache: KVCache, step: tf.Tensor) -> tuple[KVCache, Any]:
        """Once per step: the cache with its bookkeeping updated, and `where` the position
        `step` is written and read (what `write` and `read` take)."""

    def write(self, storage: tf.Tensor, x: tf.Tensor, where: Any) -> tf.Tensor:
        """One layer's key or value storage with `x` `(rows, d_model)` written at `where`."""

    def read(
        self, q: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor, group: int, where
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """`(q, keys, values, bias)` in `kernels`' shapes, for `q` `(rows, d_model)` (scaled by
        `1 / sqrt(depth)` already) in groups of `group` rows sharing a key/value row. `where`:
        self-attention's `locate` result; None for cross-attention (`memory`'s tensors)."""
