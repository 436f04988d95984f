"""Scaled dot-product attention and multi-head attention with an optional key/value cache."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.masks import mask_to_bias


def scaled_dot_product_attention(q, k, v, mask=None):
    """`softmax(q k^T / sqrt(d_k) + mask * large_negative) v` (paper section 3.2.1).

    Args:
      q: `(..., len_q, depth)` queries.
      k: `(..., len_k, depth)` keys.
      v: `(..., len_k, depth_v)` values.
      mask: optional float mask broadcastable to `(..., len_q, len_k)`; **1.0 = masked**.

    Returns:
      `(output, weights)`: `(..., len_q, depth_v)` and the attention weights
      `(..., len_q, len_k)`, whose rows sum to 1.
    """
    depth = tf.cast(tf.shape(k)[-1], q.dtype)
    logits = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(depth)  # (..., len_q, len_k)
    if mask is not None:
        logits += mask_to_bias(mask, logits.dtype)
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.matmul(weights, v), weights


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class MultiHeadAttention(tf.keras.layers.Layer):
    """Multi-head attention (paper section 3.2.2), head size `d_model / num_heads`.

    Masks follow the tutorial's convention: **1.0 = masked**.

    Args:
      d_model: model width; the query/key/value/output projections are `d_model x d_model`.
      num_heads: number of heads; must divide `d_model`.

    Call arguments:
      query: `(batch, len_q, d_model)`.
      value: `(batch, len_v, d_model)`; also the key unless `key` is given.
      key: optional `(batch, len_v, d_model)`.
      attention_mask: optional float mask broadcastable to `(batch, num_heads, len_q, len_k)`.
        (Not named `mask`: Keras treats a `mask` argument as an implicit Keras mask.)
      cache: optional dict `{"key", "value"}` of `(batch, num_heads, cache_len, depth)`.
        Without `cache_index` it holds precomputed keys/values (cross-attention: `value` is
        ignored); with `cache_index` the projected `value`/`key` of the current step are written
        at that position of the fixed-size cache before attending (self-attention decoding).
      cache_index: scalar int position written into `cache`.

    Returns:
      `(output, weights)`, or `(output, weights, cache)` when a cache is passed; `output` is
      `(batch, len_q, d_model)` and `weights` `(batch, num_heads, len_q, len_k)`.

    Example:
      >>> mha = MultiHeadAttention(d_model=8, num_heads=2)
      >>> out, w = mha(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))
      >>> out.shape, w.shape
      (TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 4]))
    """

    def __init__(self, *, d_model: int, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads}).")
        self.d_model = d_model
        self.num_heads = num_heads
        self.depth = d_model // num_heads
        dense = {"dtype": self.dtype_policy}
        self.wq = tf.keras.layers.Dense(d_model, name="query", **dense)
        self.wk = tf.keras.layers.Dense(d_model, name="key", **dense)
        self.wv = tf.keras.layers.Dense(d_model, name="value", **dense)
        self.wo = tf.keras.layers.Dense(d_model, name="output", **dense)

    def split_heads(self, x):
        """`(batch, len, d_model)` -> `(batch, num_heads, len, depth)`."""
        batch = tf.shape(x)[0]
        x = tf.reshape(x, (batch, -1, self.num_heads, self.depth))
        return tf.transpose(x, (0, 2, 1, 3))

    def project_key_value(self, value, key=None):
        """Projected, head-split keys and values: two `(batch, num_heads, len, depth)`."""
        key = value if key is None else key
        return self.split_heads(self.wk(key)), self.split_heads(self.wv(value))

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        for dense in (self.wq, self.wk, self.wv, self.wo):
            dense.build((None, None, self.d_model))
        self.built = True

    def call(self, query, value, key=None, *, attention_mask=None, cache=None, cache_index=None):
        q = self.split_heads(self.wq(query))  # (batch, heads, len_q, depth)
        if cache is None:
            k, v = self.project_key_value(value, key)
        elif cache_index is None:
            k, v = cache["key"], cache["value"]
        else:
            k_new, v_new = self.project_key_value(value, key)  # (batch, heads, 1, depth)
            # Write this step at `cache_index` of the fixed-size cache (shape stays static).
            slot = tf.one_hot(cache_index, tf.shape(cache["key"])[2], dtype=k_new.dtype)
            slot = slot[tf.newaxis, tf.newaxis, :, tf.newaxis]  # (1, 1, cache_len, 1)
            k = cache["key"] * (1 - slot) + k_new * slot
            v = cache["value"] * (1 - slot) + v_new * slot
            cache = {"key": k, "value": v}
        attended, weights = scaled_dot_product_attention(q, k, v, mask=attention_mask)
        attended = tf.transpose(attended, (0, 2, 1, 3))  # (batch, len_q, heads, depth)
        attended = tf.reshape(attended, (tf.shape(attended)[0], -1, self.d_model))
        output = self.wo(attended)
        if cache is None:
            return output, weights
        return output, weights, cache

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads)
        return config
