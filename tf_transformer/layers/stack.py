"""The stack shared by the encoder and the decoder: embedding, N layers, a final norm in pre-norm."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.layers.attention import MultiHeadAttention
from tf_transformer.layers.feed_forward import FeedForward
from tf_transformer.layers.positional_encoding import PositionalEmbedding


def layer_norm(name: str, dtype) -> tf.keras.layers.LayerNormalization:
    """The LayerNorm of every residual block (ε = 1e-6, as in the tutorial)."""
    return tf.keras.layers.LayerNormalization(epsilon=1e-6, name=name, dtype=dtype)


class SublayerBlock(tf.keras.layers.Layer):
    """What an encoder or decoder layer shares: its sizes, norms and dropouts, and `get_config`.

    A layer with `blocks` residual blocks gets `norm1 … normN` and `dropout1 … dropoutN`. Each
    block is `x = norm(x + dropout(sublayer(x)))` (post-norm, the paper) or
    `x = x + dropout(sublayer(norm(x)))` (`norm_first=True`, pre-norm), written once in
    `residual`, which the subclass's `call` runs once per block. `attention_dropout` (on the attention weights) and `activation_dropout`
    (after the feed-forward activation) go to the sublayers; like `dropout_rate`, training only.
    `activation` is the feed-forward's ("relu" or "gelu").
    """

    blocks: int  # residual blocks per layer: 2 in the encoder, 3 in the decoder

    def __init__(
        self,
        *,
        d_model: int,
        num_heads: int,
        dff: int,
        dropout_rate: float = 0.1,
        norm_first: bool = False,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation: str = "relu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.norm_first = norm_first
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation = activation

    def make_attention(self, name: str) -> MultiHeadAttention:
        """A multi-head attention sublayer of this layer's sizes."""
        return MultiHeadAttention(
            d_model=self.d_model,
            num_heads=self.num_heads,
            attention_dropout=self.attention_dropout,
            name=name,
            dtype=self.dtype_policy,
        )

    def make_feed_forward(self) -> FeedForward:
        """The position-wise feed-forward sublayer, `ffn`."""
        return FeedForward(
            d_model=self.d_model,
            dff=self.dff,
            activation_dropout=self.activation_dropout,
            activation=self.activation,
            name="ffn",
            dtype=self.dtype_policy,
        )

    def make_norms_and_dropouts(self) -> None:
        """`norm1 … normN` and `dropout1 … dropoutN`, created after the sublayers (weight order)."""
        policy = self.dtype_policy
        for i in range(1, self.blocks + 1):
            setattr(self, f"norm{i}", layer_norm(f"norm{i}", policy))
        for i in range(1, self.blocks + 1):
            setattr(self, f"dropout{i}", tf.keras.layers.Dropout(self.dropout_rate, dtype=policy))

    def residual(self, block: int, x, sublayer, *, training=None):
        """Residual block `block` (1 … `blocks`) around `sublayer`, with `norm{block}` and
        `dropout{block}`: post-norm `norm(x + dropout(y))`, pre-norm `x + dropout(y)` with
        `y` computed from `norm(x)`.

        Args:
          block: the block's number, which picks its norm and dropout.
          x: the block's input, `(..., d_model)`.
          sublayer: `h -> (y, extra)`: the sublayer on `h`, `(..., d_model)` like `x`, and
            whatever else it returns (attention weights, an updated cache, or None).
          training: dropout on when True.

        Returns:
          `(x, extra)`: the block's output and the sublayer's `extra`.
        """
        norm = getattr(self, f"norm{block}")
        y, extra = sublayer(norm(x) if self.norm_first else x)
        x = x + getattr(self, f"dropout{block}")(y, training=training)
        return (x if self.norm_first else norm(x)), extra

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        shape = (None, None, self.d_model)
        for layer in self._sublayers():
            layer.build(shape)
        for i in range(1, self.blocks + 1):
            getattr(self, f"norm{i}").build(shape)
        self.built = True

    def _sublayers(self) -> list[tf.keras.layers.Layer]:
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            num_heads=self.num_heads,
            dff=self.dff,
            dropout_rate=self.dropout_rate,
            norm_first=self.norm_first,
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            activation=self.activation,
        )
        return config


class Stack(tf.keras.layers.Layer):
    """Positional embedding, dropout and `num_layers` layers (plus a final norm in pre-norm).

    `Encoder` and `Decoder` are this stack with their own layer class and `call`: one
    implementation of the embedding, the layer list, the explicit build and the config.

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate: as in the layers.
      norm_first, attention_dropout, activation_dropout: as in the layers.
      vocab_size: the vocabulary of the ids this stack embeds.
      max_length: positions of the sinusoid table.
      positional_layout: "interleaved" (paper) or "concat" (tutorial).
      word_dropout: probability of zeroing a token's whole word embedding in training
        (Sennrich & Zhang 2019, after Gal & Ghahramani 2016); see `embed`.
      activation: the feed-forward activation of every layer ("relu" or "gelu").
    """

    layer_class: type[SublayerBlock]
    # The attribute holding the layer list. Its name is part of every checkpoint's object graph
    # (`encoder/enc_layers/0/...`), so the encoder and decoder keep the names they always had.
    layers_attribute: str

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
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        word_dropout: float = 0.0,
        activation: str = "relu",
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
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.word_dropout = word_dropout
        self.activation = activation
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
        # One draw per token, shared by its d_model features: whole embeddings are dropped.
        # (A rate of 0 makes a Dropout with no seed variable: checkpoints keep their contents.)
        self.word_dropout_layer = tf.keras.layers.Dropout(
            word_dropout, noise_shape=(None, None, 1), dtype=policy
        )
        stack = [
            self.layer_class(
                d_model=d_model,
                num_heads=num_heads,
                dff=dff,
                dropout_rate=dropout_rate,
                norm_first=norm_first,
                attention_dropout=attention_dropout,
                activation_dropout=activation_dropout,
                activation=activation,
                name=f"layer_{i}",
                dtype=policy,
            )
            for i in range(num_layers)
        ]
        setattr(self, self.layers_attribute, stack)
        self.final_norm = layer_norm("final_norm", policy) if norm_first else None

    @property
    def stack(self) -> list[SublayerBlock]:
        """The `num_layers` layers, first to last."""
        return getattr(self, self.layers_attribute)

    def share_embedding(self, other: Stack) -> None:
        """Embeds this stack's ids with `other`'s token embedding layer (before building): the
        weights and checkpoints hold one matrix, under `other` (shared vocabularies only)."""
        if other.vocab_size != self.vocab_size:
            raise InvalidValueError(
                f"share_embeddings needs one vocabulary: input_vocab_size ({other.vocab_size}) "
                f"!= target_vocab_size ({self.vocab_size}). Train with a shared vocabulary "
                "(shared_vocab, --shared-vocab)."
            )
        self.embedding._tracker.untrack(self.embedding.embedding)  # Keras 3 keeps it tracked
        self.embedding.embedding = other.embedding.embedding

    def embed(self, ids, *, offset=0, training=None):
        """Scaled embeddings, word dropout, plus positions (from `offset`), then dropout."""
        # Word dropout zeroes a token's whole word embedding before the positions are added:
        # the slot stays where it was (its position survives), so the model learns to infer
        # the missing word from its context rather than losing track of the sentence order.
        # Only the surviving word embeddings are scaled by 1 / (1 - p), not the positions.
        words = self.embedding.scaled_embedding(ids)  # (batch, len, d_model)
        words = self.word_dropout_layer(words, training=training)
        x = words + self.embedding.positions(ids, offset=offset)
        return self.dropout(x, training=training)

    def finish(self, x):
        """The final LayerNorm of a pre-norm stack (identity in post-norm)."""
        return x if self.final_norm is None else self.final_norm(x)

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        self.embedding.build((None, None))
        for layer in self.stack:
            layer.build()
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.d_model))
        self.built = True

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
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            word_dropout=self.word_dropout,
            activation=self.activation,
        )
        return config
