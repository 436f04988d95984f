"""The sinusoidal positional-encoding table and the PositionalEmbedding layer."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from tf_transformer.errors import InvalidValueError

LAYOUTS = ("interleaved", "concat")


def positional_encoding(length: int, depth: int, layout: str = "interleaved") -> tf.Tensor:
    """The sinusoid table of section 3.5 of the paper.

    With angle `a(pos, i) = pos / 10000^(2i / depth)` for `i < depth / 2`:

    * `layout="interleaved"` (the paper): `PE[pos, 2i] = sin(a)`, `PE[pos, 2i + 1] = cos(a)`.
    * `layout="concat"` (the TensorFlow tutorial): `PE[pos, i] = sin(a)`,
      `PE[pos, depth / 2 + i] = cos(a)`; the same values with the columns permuted.

    Args:
      length: number of positions.
      depth: model width; must be even.
      layout: "interleaved" or "concat".

    Returns:
      float32 `(length, depth)`.
    """
    if depth % 2:
        raise InvalidValueError(f"depth must be even for the sinusoid table, got {depth}.")
    if layout not in LAYOUTS:
        raise InvalidValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    positions = np.arange(length, dtype=np.float64)[:, np.newaxis]  # (length, 1)
    rates = 1.0 / np.power(10000.0, np.arange(0, depth, 2, dtype=np.float64) / depth)
    angles = positions * rates[np.newaxis, :]  # (length, depth / 2)
    if layout == "concat":
        table = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    else:
        table = np.empty((length, depth), dtype=np.float64)
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles)
    return tf.constant(table, dtype=tf.float32)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class PositionalEmbedding(tf.keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model) plus the sinusoid table (paper section 3.4-3.5).

    Args:
      vocab_size: number of token ids.
      d_model: embedding width.
      max_length: number of positions in the table; longer inputs raise an error.
      positional_layout: "interleaved" (paper) or "concat" (tutorial).

    Call arguments:
      ids: `(batch, len)` integer ids.
      offset: position of the first id (non-zero when decoding one step at a time).

    Returns:
      `(batch, len, d_model)` in the layer's compute dtype.

    Example:
      >>> emb = PositionalEmbedding(vocab_size=100, d_model=8, max_length=16)
      >>> emb(tf.constant([[5, 6, 0]])).shape
      TensorShape([1, 3, 8])
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        d_model: int,
        max_length: int = 512,
        positional_layout: str = "interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.positional_layout = positional_layout
        self.embedding = tf.keras.layers.Embedding(
            vocab_size, d_model, name="embedding", dtype=self.dtype_policy
        )
        self.pos_encoding = positional_encoding(max_length, d_model, positional_layout)

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        self.embedding.build((None, None))
        self.built = True

    def call(self, ids, *, offset=0):
        return self.scaled_embedding(ids) + self.positions(ids, offset=offset)

    def scaled_embedding(self, ids):
        """The token embeddings times sqrt(d_model): `(batch, len, d_model)`, no positions."""
        x = self.embedding(ids)  # (batch, len, d_model)
        # Cast the scale to the compute dtype: float16 * float32 raises under mixed_float16.
        return x * tf.cast(math.sqrt(self.d_model), x.dtype)

    def positions(self, ids, *, offset=0):
        """The sinusoid rows of `ids`' positions (from `offset`): `(1, len, d_model)`."""
        # A static length keeps the slice static under XLA: `table[offset : offset + length]`
        # with a tensor offset compiles to a dynamic shape padded to `max_length` rows, so a
        # one-step decode did the work of 512 positions.
        length = ids.shape[1] if ids.shape[1] is not None else tf.shape(ids)[1]
        tf.debugging.assert_less_equal(
            tf.cast(offset, tf.int32) + length,
            self.max_length,
            message="Sequence longer than max_length of the positional table.",
        )
        positions = tf.slice(self.pos_encoding, [offset, 0], [length, self.d_model])
        return tf.cast(positions, self.compute_dtype)[tf.newaxis]

    def position(self, index):
        """The sinusoid row of one position `index` (scalar, below `max_length`): `(d_model,)`."""
        return tf.cast(tf.gather(self.pos_encoding, index), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            max_length=self.max_length,
            positional_layout=self.positional_layout,
        )
        return config
