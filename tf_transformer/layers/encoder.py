"""The encoder layer and the encoder stack."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.attention import MultiHeadAttention
from tf_transformer.layers.feed_forward import FeedForward
from tf_transformer.layers.positional_encoding import PositionalEmbedding


def layer_norm(name, dtype):
    return tf.keras.layers.LayerNormalization(epsilon=1e-6, name=name, dtype=dtype)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class EncoderLayer(tf.keras.layers.Layer):
    """Self-attention then feed-forward, each with dropout, residual and LayerNorm (section 3.1).

    Post-norm (`x = norm(x + sublayer(x))`, the paper) by default; `norm_first=True` gives
    pre-norm (`x = x + sublayer(norm(x))`).

    Args:
      d_model, num_heads, dff: sizes (paper names).
      dropout_rate: dropout on each sublayer output before the residual sum.
      norm_first: pre-norm instead of post-norm.

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

    def __init__(
        self,
        *,
        d_model: int,
        num_heads: int,
        dff: int,
        dropout_rate: float = 0.1,
        norm_first: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.norm_first = norm_first
        policy = self.dtype_policy
        self.self_attention = MultiHeadAttention(
            d_model=d_model, num_heads=num_heads, name="self_attention", dtype=policy
        )
        self.ffn = FeedForward(d_model=d_model, dff=dff, name="ffn", dtype=policy)
        self.norm1 = layer_norm("norm1", policy)
        self.norm2 = layer_norm("norm2", policy)
        self.dropout1 = tf.keras.layers.Dropout(dropout_rate, dtype=policy)
        self.dropout2 = tf.keras.layers.Dropout(dropout_rate, dtype=policy)

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        shape = (None, None, self.d_model)
        for layer in (self.self_attention, self.ffn, self.norm1, self.norm2):
            layer.build(shape)
        self.built = True

    def call(self, x, *, padding_mask=None, training=None):
        # Self-attention block.
        h = self.norm1(x) if self.norm_first else x
        attended, weights = self.self_attention(h, h, attention_mask=padding_mask)
        x = x + self.dropout1(attended, training=training)
        if not self.norm_first:
            x = self.norm1(x)
        # Feed-forward block.
        h = self.norm2(x) if self.norm_first else x
        x = x + self.dropout2(self.ffn(h), training=training)
        if not self.norm_first:
            x = self.norm2(x)
        return x, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            num_heads=self.num_heads,
            dff=self.dff,
            dropout_rate=self.dropout_rate,
            norm_first=self.norm_first,
        )
        return config


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Encoder(tf.keras.layers.Layer):
    """Positional embedding, dropout and `num_layers` EncoderLayers (plus a final norm in pre-norm).

    The padding mask is passed explicitly to every layer (Keras 3 implicit masks would be dropped
    after the first layer).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate, norm_first: as in EncoderLayer.
      vocab_size: source vocabulary size.
      max_length: positions of the sinusoid table.
      positional_layout: "interleaved" or "concat".

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

    def __init__(
        self,
        *,
        num_layers: int,
        d_model: int,
        num_heads: int,
        dff: int,
        vocab_size: int,
        dropout_rate: float = 0.1,
        max_length: int = 512,
        norm_first: bool = False,
        positional_layout: str = "interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.vocab_size = vocab_size
        self.dropout_rate = dropout_rate
        self.max_length = max_length
        self.norm_first = norm_first
        self.positional_layout = positional_layout
        policy = self.dtype_policy
        self.embedding = PositionalEmbedding(
            vocab_size=vocab_size,
            d_model=d_model,
            max_length=max_length,
            positional_layout=positional_layout,
            name="positional_embedding",
            dtype=policy,
        )
        self.dropout = tf.keras.layers.Dropout(dropout_rate, dtype=policy)
        self.enc_layers = [
            EncoderLayer(
                d_model=d_model,
                num_heads=num_heads,
                dff=dff,
                dropout_rate=dropout_rate,
                norm_first=norm_first,
                name=f"layer_{i}",
                dtype=policy,
            )
            for i in range(num_layers)
        ]
        self.final_norm = layer_norm("final_norm", policy) if norm_first else None

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        self.embedding.build((None, None))
        for layer in self.enc_layers:
            layer.build()
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.d_model))
        self.built = True

    def call(self, ids, *, padding_mask=None, training=None):
        x = self.dropout(self.embedding(ids), training=training)
        weights = []
        for layer in self.enc_layers:
            x, layer_weights = layer(x, padding_mask=padding_mask, training=training)
            weights.append(layer_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            num_layers=self.num_layers,
            d_model=self.d_model,
            num_heads=self.num_heads,
            dff=self.dff,
            vocab_size=self.vocab_size,
            dropout_rate=self.dropout_rate,
            max_length=self.max_length,
            norm_first=self.norm_first,
            positional_layout=self.positional_layout,
        )
        return config
