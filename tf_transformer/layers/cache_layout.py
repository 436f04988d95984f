"""The decoding contract: how a cache layout stores, writes and reads keys and values (the same
projections and attention for all: a layout decides where a position goes and the shapes and
kernels it is read with; one class built as `Layout(num_heads, d_model)`), and the state."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Protocol

import tensorflow as tf


class LayerCache(NamedTuple):
    """One decoder layer's self-attention keys and values in a layout's shapes, one row per
    decoded sequence (a search tiles and reorders it as any nest of tensors)."""

    key: tf.Tensor
    value: tf.Tensor


class CacheLayout(Protocol):
    """How decoding stores the keys and values of the positions decoded; also the attention's
    kernels for `read`'s shapes, as `attention.MatmulKernels` (which a layout may subclass)."""

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
        """`(q, keys, values, bias)` in the kernels' shapes, for `q` `(rows, d_model)` (scaled
        by `1 / sqrt(depth)` already), each `group` consecutive rows sharing one key/value row."""

    def output_kernel(self, table: tf.Variable, dtype: tf.DType) -> tf.Tensor | None:
        """A tied output projection's `(d_model, vocab)` kernel, made once per call; None: the
        steps multiply by the embedding table transposed."""


@dataclasses.dataclass(frozen=True)
class DecodingState:
    """`Transformer.start_decoding`'s result; `Transformer.decode_step` returns it updated. A
    search carries only `cache` from step to step (and reorders its rows with the hypotheses);
    the rest is made once per call and closed over (`tf.function` captures it).

    Attributes:
      layout, cache: the `CacheLayout`; per decoder layer, the self-attention `LayerCache`.
      cross, cross_bias: per decoder layer, the encoder output's cross-attention `(key, value)`;
        the source padding as an additive bias. One row per sentence, shared by its rows.
      projections: per decoder layer, `MultiHeadAttention.decoding_projection` of `(self, cross)`.
      self_bias: the look-ahead mask as a bias, row `t` for position `t`.
      variables: `(variable, value)`: every weight read once, for `keras.StatelessScope`.
      output_kernel: `CacheLayout.output_kernel`'s, or None.
    """

    layout: CacheLayout
    cache: list[LayerCache]
    cross: list[tuple[tf.Tensor, tf.Tensor]]
    cross_bias: tf.Tensor
    projections: list[tuple[tuple[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]]
    self_bias: tf.Tensor
    variables: list[tuple[tf.Variable, tf.Tensor]]
    output_kernel: tf.Tensor | None = None
