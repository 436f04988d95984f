"""The decoder layer and the decoder stack (whole sequences, or one position with a cache)."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.stack import Stack, SublayerBlock


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DecoderLayer(SublayerBlock):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (section 3.1).

    Each block has dropout, a residual connection and LayerNorm; post-norm by default,
    pre-norm with `norm_first=True`. Masks use **1.0 = masked**.

    Args:
      d_model, num_heads, dff, dropout_rate: as in EncoderLayer.
      norm_first, attention_dropout, activation_dropout, activation: as in EncoderLayer.

    Call arguments:
      x: `(batch, tgt_len, d_model)`, or `(rows, d_model)` (one position per row) with `cache`.
      context: `(batch, src_len, d_model)` encoder output (unused with `cache`).
      self_mask: `(batch, 1, tgt_len, tgt_len)` look-ahead + target padding mask.
      cross_mask: `(batch, 1, 1, src_len)` source padding mask.
      training: dropout on when True.
      cache: decoding: `(self, cross)`, the two attentions' `AttentionCache`s.

    Returns:
      `(x, self_weights, cross_weights)`; with `cache`, `(x, self, cross)`: the caches, the
      self-attention one with this position written.

    Example:
      >>> layer = DecoderLayer(d_model=8, num_heads=2, dff=16)
      >>> y, sw, cw = layer(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))
      >>> y.shape, cw.shape
      (TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 4]))
    """

    blocks = 3

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = self.make_attention("self_attention")
        self.cross_attention = self.make_attention("cross_attention")
        self.ffn = self.make_feed_forward()
        self.make_norms_and_dropouts()

    def _sublayers(self):
        return [self.self_attention, self.cross_attention, self.ffn]

    def call(self, x, context=None, *, self_mask=None, cross_mask=None, training=None, cache=None):
        self_cache, cross_cache = (None, None) if cache is None else cache
        # Masked self-attention block.
        x, self_weights = self.residual(
            1,
            x,
            lambda h: self.self_attention(
                h, h, attention_mask=self_mask, training=training, cache=self_cache
            ),
            training=training,
        )
        # Cross-attention block: queries from the decoder, keys/values from the encoder.
        x, cross_weights = self.residual(
            2,
            x,
            lambda h: self.cross_attention(
                h, context, attention_mask=cross_mask, training=training, cache=cross_cache
            ),
            training=training,
        )
        # Feed-forward block.
        x, _ = self.residual(
            3, x, lambda h: (self.ffn(h, training=training), None), training=training
        )
        return x, self_weights, cross_weights


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Decoder(Stack):
    """Positional embedding, dropout and `num_layers` DecoderLayers (plus a final norm in pre-norm).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate, norm_first, max_length: as in Encoder.
      positional_layout, attention_dropout, activation_dropout, activation: as in Encoder.
      vocab_size: target vocabulary size.
      word_dropout: probability of zeroing a target token's word embedding (training only).

    Call arguments:
      ids: `(batch, tgt_len)` decoder input ids (START first), or `(rows,)` with `cache`.
      context: `(batch, src_len, d_model)` encoder output (unused with `cache`).
      self_mask, cross_mask, training: as in DecoderLayer.
      cache: decoding one position: a list with each layer's `(self, cross)` `AttentionCache`s.
      position: with `cache`, the position of `ids` (scalar int32, below `max_length`).

    Returns:
      `(x, attention)`: `(batch, tgt_len, d_model)` and a dict with lists `"self"` and `"cross"`
      of per-layer weights; with `cache`, `(x, cache)`: `(rows, d_model)` and the caches with
      the position written.

    Example:
      >>> dec = Decoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=50)
      >>> y, attention = dec(tf.constant([[2, 7]]), tf.ones((1, 4, 8)))
      >>> y.shape, attention["cross"][0].shape
      (TensorShape([1, 2, 8]), TensorShape([1, 2, 2, 4]))
    """

    layer_class = DecoderLayer
    layers_attribute = "dec_layers"

    def call(
        self,
        ids,
        context=None,
        *,
        self_mask=None,
        cross_mask=None,
        training=None,
        cache=None,
        position=None,
    ):
        if cache is None:
            x = self.embed(ids, training=training)
        else:  # one position: no dropout, the sinusoid's row (the caller checked `position`)
            x = self.embedding.scaled_embedding(ids) + self.embedding.position(position)
        outputs = []  # per layer: the attention weights, or with `cache` the updated caches
        masks = {"self_mask": self_mask, "cross_mask": cross_mask}
        for layer, layer_cache in zip(self.stack, cache or [None] * len(self.stack)):
            x, self_w, cross_w = layer(x, context, **masks, training=training, cache=layer_cache)
            outputs.append((self_w, cross_w))
        if cache is not None:
            return self.finish(x), outputs
        return self.finish(x), {"self": [w for w, _ in outputs], "cross": [w for _, w in outputs]}
