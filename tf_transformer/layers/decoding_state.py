"""What a decoding call prepares once and each decode step reads and updates."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tf_transformer.layers.cache_layout import CacheLayout, LayerCache


@dataclasses.dataclass(frozen=True)
class DecodingState:
    """`Transformer.start_decoding`'s result; `Transformer.decode_step` returns it updated.

    A search carries only `cache` from one step to the next (and reorders its rows with the
    hypotheses); the rest is made once per call and closed over (`tf.function` captures it).

    Attributes:
      layout: the `CacheLayout` of the caches.
      cache: per decoder layer, the self-attention `LayerCache`, one row per decoded sequence.
      cross: per decoder layer, the encoder output's cross-attention `(key, value)`, one row per
        sentence, shared by the sentence's rows in `cache`.
      cross_bias: the source padding mask as an additive bias, one row per sentence.
      projections: per decoder layer, `(self, cross)`: `MultiHeadAttention.decoding_projection`
        of the self-attention's query/key/value and of the cross-attention's query.
      self_bias: the look-ahead mask as a bias, row `t` for position `t`.
      variables: `(variable, value)` pairs the steps read instead of the variables
        (`keras.StatelessScope`): every weight read once per call.
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
