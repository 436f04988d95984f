"""The decoder layer and the decoder stack, with an optional key/value cache for decoding."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.attention import MultiHeadAttention
from tf_transformer.layers.feed_forward import FeedForward
from tf_transformer.layers.stack import Stack, SublayerBlock


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DecoderLayer(SublayerBlock):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (section 3.1).

    Each block has dropout, a residual connection and LayerNorm; post-norm by default,
    pre-norm with `norm_first=True`. Masks use **1.0 = masked**.

    Args:
      d_model, num_heads, dff, dropout_rate, norm_first: as in EncoderLayer.

    Call arguments:
      x: `(batch, tgt_len, d_model)`.
      context: `(batch, src_len, d_model)` encoder output (ignored when the cache holds the
        cross-attention keys/values).
      self_mask: `(batch, 1, tgt_len, tgt_len)` look-ahead + target padding mask, or with a cache
        `(batch, 1, 1, cache_len)` masking the cache slots after `cache_index`.
      cross_mask: `(batch, 1, 1, src_len)` source padding mask.
      training: dropout on when True.
      cache: optional `{"self": {"key", "value"}, "cross": {"key", "value"}}` (see
        `Decoder.initial_cache`); then `x` is one step `(batch, 1, d_model)`.
      cache_index: scalar position of this step.

    Returns:
      `(x, self_weights, cross_weights)`, plus the updated cache when one is passed.

    Example:
      >>> layer = DecoderLayer(d_model=8, num_heads=2, dff=16)
      >>> y, sw, cw = layer(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))
      >>> y.shape, cw.shape
      (TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 4]))
    """

    blocks = 3

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        policy = self.dtype_policy
        sizes = {"d_model": self.d_model, "num_heads": self.num_heads, "dtype": policy}
        self.self_attention = MultiHeadAttention(name="self_attention", **sizes)
        self.cross_attention = MultiHeadAttention(name="cross_attention", **sizes)
        self.ffn = FeedForward(d_model=self.d_model, dff=self.dff, name="ffn", dtype=policy)
        self.make_norms_and_dropouts()

    def _sublayers(self):
        return [self.self_attention, self.cross_attention, self.ffn]

    def call(
        self,
        x,
        context,
        *,
        self_mask=None,
        cross_mask=None,
        training=None,
        cache=None,
        cache_index=None,
    ):
        new_cache = None
        # Masked self-attention block.
        h = self.norm1(x) if self.norm_first else x
        if cache is None:
            attended, self_weights = self.self_attention(h, h, attention_mask=self_mask)
        else:
            attended, self_weights, self_cache = self.self_attention(
                h, h, attention_mask=self_mask, cache=cache["self"], cache_index=cache_index
            )
            new_cache = {"self": self_cache, "cross": cache["cross"]}
        x = x + self.dropout1(attended, training=training)
        if not self.norm_first:
            x = self.norm1(x)
        # Cross-attention block: queries from the decoder, keys/values from the encoder.
        h = self.norm2(x) if self.norm_first else x
        if cache is None:
            attended, cross_weights = self.cross_attention(h, context, attention_mask=cross_mask)
        else:
            attended, cross_weights, _ = self.cross_attention(
                h, context, attention_mask=cross_mask, cache=cache["cross"]
            )
        x = x + self.dropout2(attended, training=training)
        if not self.norm_first:
            x = self.norm2(x)
        # Feed-forward block.
        h = self.norm3(x) if self.norm_first else x
        x = x + self.dropout3(self.ffn(h), training=training)
        if not self.norm_first:
            x = self.norm3(x)
        if new_cache is None:
            return x, self_weights, cross_weights
        return x, self_weights, cross_weights, new_cache


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Decoder(Stack):
    """Positional embedding, dropout and `num_layers` DecoderLayers (plus a final norm in pre-norm).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate, norm_first, max_length,
      positional_layout: as in Encoder.
      vocab_size: target vocabulary size.

    Call arguments:
      ids: `(batch, tgt_len)` decoder input ids (START first); one step `(batch, 1)` with a cache.
      context: `(batch, src_len, d_model)` encoder output.
      self_mask, cross_mask, training, cache_index: as in DecoderLayer.
      cache: optional list with one DecoderLayer cache per layer (`initial_cache`).

    Returns:
      `(x, attention)`: `(batch, tgt_len, d_model)` and a dict with lists `"self"` and `"cross"`
      of per-layer weights; plus the updated cache when one is passed.

    Example:
      >>> dec = Decoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=50)
      >>> y, attention = dec(tf.constant([[2, 7]]), tf.ones((1, 4, 8)))
      >>> y.shape, attention["cross"][0].shape
      (TensorShape([1, 2, 8]), TensorShape([1, 2, 2, 4]))
    """

    layer_class = DecoderLayer
    layers_attribute = "dec_layers"

    def initial_cache(self, context, cache_length):
        """A fixed-size decoding cache: empty self-attention slots, cross keys/values computed once.

        Args:
          context: `(batch, src_len, d_model)` encoder output.
          cache_length: number of decoder positions the cache holds.

        Returns:
          A list (one per layer) of `{"self": {"key", "value"}, "cross": {"key", "value"}}`,
          each tensor `(batch, num_heads, len, d_model / num_heads)`.
        """
        batch = tf.shape(context)[0]
        depth = self.d_model // self.num_heads
        zeros = tf.zeros((batch, self.num_heads, cache_length, depth), context.dtype)
        cache = []
        for layer in self.stack:
            key, value = layer.cross_attention.project_key_value(context)
            cache.append(
                {"self": {"key": zeros, "value": zeros}, "cross": {"key": key, "value": value}}
            )
        return cache

    def call(
        self,
        ids,
        context,
        *,
        self_mask=None,
        cross_mask=None,
        training=None,
        cache=None,
        cache_index=None,
    ):
        offset = 0 if cache_index is None else cache_index
        x = self.embed(ids, offset=offset, training=training)
        attention = {"self": [], "cross": []}
        new_cache = []
        for i, layer in enumerate(self.stack):
            if cache is None:
                x, self_w, cross_w = layer(
                    x, context, self_mask=self_mask, cross_mask=cross_mask, training=training
                )
            else:
                x, self_w, cross_w, layer_cache = layer(
                    x,
                    context,
                    self_mask=self_mask,
                    cross_mask=cross_mask,
                    training=training,
                    cache=cache[i],
                    cache_index=cache_index,
                )
                new_cache.append(layer_cache)
            attention["self"].append(self_w)
            attention["cross"].append(cross_w)
        x = self.finish(x)
        if cache is None:
            return x, attention
        return x, attention, new_cache
