"""The position-wise feed-forward network."""

from __future__ import annotations

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class FeedForward(tf.keras.layers.Layer):
    """`activation(x W1 + b1) W2 + b2` applied at every position (paper section 3.3: ReLU).

    Args:
      d_model: input and output width.
      dff: inner width.
      activation_dropout: dropout on the inner activations, after the activation (training only).
      activation: the inner activation, a Keras activation name: "relu" (the paper) or "gelu".

    Call arguments:
      x: `(batch, len, d_model)`.
      training: activation dropout on when True.

    Returns:
      `(batch, len, d_model)`.

    Example:
      >>> ffn = FeedForward(d_model=8, dff=32)
      >>> ffn(tf.ones((2, 5, 8))).shape
      TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        *,
        d_model: int,
        dff: int,
        activation_dropout: float = 0.0,
        activation: str = "relu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.dff = dff
        self.activation_dropout = activation_dropout
        self.activation = activation
        self.inner = tf.keras.layers.Dense(
            dff, activation=activation, name="inner", dtype=self.dtype_policy
        )
        self.outer = tf.keras.layers.Dense(d_model, name="outer", dtype=self.dtype_policy)
        # A rate of 0 makes a Dropout with no seed variable: checkpoints keep their contents.
        self.activation_dropout_layer = tf.keras.layers.Dropout(
            activation_dropout, dtype=self.dtype_policy
        )

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        self.inner.build((None, None, self.d_model))
        self.outer.build((None, None, self.dff))
        self.built = True

    def call(self, x, training=None):
        h = self.inner(x)  # (batch, len, dff), after the activation
        return self.outer(self.activation_dropout_layer(h, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            dff=self.dff,
            activation_dropout=self.activation_dropout,
            activation=self.activation,
        )
        return config
