"""The encoder layer and the encoder stack."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.stack import Stack, SublayerBlock


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class EncoderLayer(SublayerBlock):
    """Self-attention then feed-forward, each with dropout, residual and LayerNorm (section 3.1).

    Post-norm (`x = norm(x + sublayer(x))`, the paper) by default; `norm_first=True` gives
    pre-norm (`x = x + sublayer(norm(x))`).

    Args:
      d_model, num_heads, dff: sizes (paper names).
      dropout_rate: dropout on each sublayer output before the residual sum.
      norm_first: pre-norm instead of post-norm.
      attention_dropout: dropout on the attention weights (after the softmax).
      activation_dropout: dropout after the feed-forward activation.
      activation: the feed-forward activation, "relu" (the paper) or "gelu".

    Call arguments:
      x: `(batch, len, d_model)`.
      padding_mask: float padding mask `(batch, 1, 1, len)`, **1.0 = masked** (PAD).
      training: dropout on when True.

    Returns:
      `(x, weights)`: `(batch, len, d_model)` and self-attention weights
      `(batch, num_heads, len, len)`.

    Example:
      >>> layer = EncoderLayer(d_model=8, num_heads=2, dff=16)
      >>> y, w = layer(tf.ones((1, 3, 8)))
      >>> y.shape, w.shape
      (TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 3]))
    """

    blocks = 2

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = self.make_attention("self_attention")
        self.ffn = self.make_feed_forward()
        self.make_norms_and_dropouts()

    def _sublayers(self):
        return [self.self_attention, self.ffn]

    def call(self, x, *, padding_mask=None, training=None):
        # Self-attention block.
        x, weights = self.residual(
            1,
            x,
            lambda h: self.self_attention(h, h, attention_mask=padding_mask, training=training),
            training=training,
        )
        # Feed-forward block.
        x, _ = self.residual(
            2, x, lambda h: (self.ffn(h, training=training), None), training=training
        )
        return x, weights


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Encoder(Stack):
    """Positional embedding, dropout and `num_layers` EncoderLayers (plus a final norm in pre-norm).

    The padding mask is passed explicitly to every layer (Keras 3 implicit masks would be dropped
    after the first layer).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate: as in EncoderLayer.
      norm_first, attention_dropout, activation_dropout, activation: as in EncoderLayer.
      vocab_size: source vocabulary size.
      max_length: positions of the sinusoid table.
      positional_layout: "interleaved" or "concat".
      word_dropout: probability of zeroing a source token's word embedding (training only).

    Call arguments:
      ids: `(batch, src_len)` source ids, 0 = PAD.
      padding_mask: float padding mask `(batch, 1, 1, src_len)`, **1.0 = masked**.
      training: dropout on when True.

    Returns:
      `(context, weights)`: `(batch, src_len, d_model)` and a list with each layer's
      self-attention weights `(batch, num_heads, src_len, src_len)`.

    Example:
      >>> enc = Encoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=50)
      >>> context, weights = enc(tf.constant([[4, 5, 0]]))
      >>> context.shape, len(weights)
      (TensorShape([1, 3, 8]), 2)
    """

    layer_class = EncoderLayer
    layers_attribute = "enc_layers"

    def call(self, ids, *, padding_mask=None, training=None):
        x = self.embed(ids, training=training)
        weights = []
        for layer in self.stack:
            x, layer_weights = layer(x, padding_mask=padding_mask, training=training)
            weights.append(layer_weights)
        return self.finish(x), weights
