"""The decoder layer and the decoder stack (whole sequences, or one position with a cache)."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.stack import Stack, SublayerBlock


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DecoderLayer(SublayerBlock):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (section 3.1),
    each block with dropout, a residual connection and LayerNorm (post-norm, or pre-norm with
    `norm_first=True`). Arguments as `EncoderLayer`'s.

    Call arguments:
      x: `(batch, tgt_len, d_model)`, or `(rows, d_model)` (one position per row) with `cache`.
      context: `(batch, src_len, d_model)` encoder output (unused with `cache`).
      self_mask, cross_mask: look-ahead + target padding `(batch, 1, tgt_len, tgt_len)` and
        source padding `(batch, 1, 1, src_len)`, **1.0 = masked**.
      training: dropout on when True.
      cache: `(self, cross)`, the two attentions' `AttentionCache`s.

    Returns:
      `(x, self_weights, cross_weights)`; with `cache`, `(x, self, cross)`: the caches, the
      self-attention one with this position written.

    Example:
      >>> layer = DecoderLayer(d_model=8, num_heads=2, dff=16)
      >>> [t.shape for t in layer(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))]
      [TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 3]), TensorShape([1, 2, 3, 4])]
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
        options = {"training": training}

        def self_attention(h):
            return self.self_attention(h, h, attention_mask=self_mask, cache=self_cache, **options)

        def cross_attention(h):  # queries from the decoder, keys/values from the encoder
            return self.cross_attention(
                h, context, attention_mask=cross_mask, cache=cross_cache, **options
            )

        x, self_weights = self.residual(1, x, self_attention, **options)
        x, cross_weights = self.residual(2, x, cross_attention, **options)
        x, _ = self.residual(3, x, lambda h: (self.ffn(h, **options), None), **options)
        return x, self_weights, cross_weights


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Decoder(Stack):
    """Positional embedding, dropout and `num_layers` DecoderLayers (plus a final norm in
    pre-norm). Arguments as `Encoder`'s; `vocab_size` is the target vocabulary's. `step` decodes
    one position.

    Call arguments:
      ids: `(batch, tgt_len)` decoder input ids (START first).
      context, self_mask, cross_mask, training: as in DecoderLayer.

    Returns:
      `(x, attention)`: `(batch, tgt_len, d_model)` and per-layer weights, `"self"`, `"cross"`.

    Example:
      >>> dec = Decoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=50)
      >>> y, attention = dec(tf.constant([[2, 7]]), tf.ones((1, 4, 8)))
      >>> y.shape, attention["cross"][0].shape
      (TensorShape([1, 2, 8]), TensorShape([1, 2, 2, 4]))
    """

    layer_class = DecoderLayer
    layers_attribute = "dec_layers"

    def call(self, ids, context, *, self_mask=None, cross_mask=None, training=None):
        x, weights = self.embed(ids, training=training), {"self": [], "cross": []}
        for layer in self.stack:
            x, self_w, cross_w = layer(
                x, context, self_mask=self_mask, cross_mask=cross_mask, training=training
            )
            weights["self"].append(self_w)
            weights["cross"].append(cross_w)
        return self.finish(x), weights

    def step(self, ids, position, caches):
        """One position (no dropout): int `ids` `(rows,)` at `position`, each layer's `(self,
        cross)` `AttentionCache`s -> `(rows, d_model)` and the self-attention caches, written."""
        x = self.embedding.scaled_embedding(ids) + self.embedding.position(position)
        written = []
        for layer, cache in zip(self.stack, caches, strict=True):
            x, own, _ = layer(x, cache=cache)
            written.append(own)
        return self.finish(x), written
