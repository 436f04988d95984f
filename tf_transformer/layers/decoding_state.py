"""What a decoding call prepares once and each decode step reads and updates."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tf_transformer.layers.cache_layout import CacheLayout, KVCache


@dataclasses.dataclass(frozen=True)
class DecodingState:
    """`Transformer.start_decoding`'s result; `Transformer.decode_step` returns it updated.

    A search loop carries three parts of it (`carried`, `resume`): the rest is made once per
    decoding call and closed over (`tf.function` captures it, as constants of the loop).

    Attributes:
      layout: the `CacheLayout` of the caches.
      beam_size: rows per sentence (`rows = batch * beam_size`, sentence-major).
      cache: the self-attention `KVCache`: follows the hypotheses (beam search tiles it from
        `batch` rows and reorders it).
      cross: per decoder layer, the encoder output's cross-attention `(key, value)`, per sentence
        (`batch` rows, shared by its beams).
      cross_bias: the source padding mask as an additive bias, per sentence.
      projections: per decoder layer, `(self, cross)`: `MultiHeadAttention.decoding_projection`
        of the self-attention's query/key/value and of the cross-attention's query.
      self_bias: `(cache_length, 1, cache_length)`-like look-ahead bias, row `t` for position `t`.
      variables: `(variable, value)` pairs the steps read instead of the variables
        (`keras.StatelessScope`): every weight read once per call.
      output_kernel: a tied output projection's matrix transposed beforehand, or None.
    """

    layout: CacheLayout
    beam_size: int
    cache: KVCache
    cross: list[tuple[tf.Tensor, tf.Tensor]]
    cross_bias: tf.Tensor
    projections: list[tuple[tuple[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]]
    self_bias: tf.Tensor
    variables: list[tuple[Any, tf.Tensor]]
    output_kernel: tf.Tensor | None = None

    def carried(self) -> tuple[Any, Any, Any]:
        """`(per_beam, per_sentence, in_place)`: the nests a search loop carries from one step
        to the next (`inference.search.SplitCache`'s parts: reordered with the beams, shared by
        a sentence's beams, tiled but never reordered)."""
        per_beam, in_place = self.cache.split()
        return per_beam, (self.cross, self.cross_bias), in_place

    def resume(self, per_beam: Any, per_sentence: Any, in_place: Any) -> DecodingState:
        """This state with `carried`'s parts as the loop carried them."""
        cross, cross_bias = per_sentence
        cache = self.cache.join(per_beam, in_place)
        return dataclasses.replace(self, cache=cache, cross=cross, cross_bias=cross_bias)
