"""Scaled dot-product attention and multi-head attention (with a key/value cache for decoding)."""

from __future__ import annotations

import dataclasses
import functools
import math

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.layers.cache_layout import CacheLayout
from tf_transformer.masks import mask_to_bias


class MatmulKernels:
    """The products and length reductions of `scaled_dot_product_attention` for `(..., len,
    depth)` queries, keys and values (`tf.matmul`, reductions over the last axis). A cache layout
    is its own kernels, for the shapes it reads (`layers.cache_layout`)."""

    normalise_after = False  # True: divide the weighted values by `total`, not the weights

    def scores(self, q, k):
        return tf.matmul(q, k, transpose_b=True)

    def peak(self, logits):
        return tf.reduce_max(logits, axis=-1, keepdims=True)

    def total(self, exp):
        return tf.reduce_sum(exp, axis=-1, keepdims=True)

    def weigh(self, weights, v):
        return tf.matmul(weights, v)


MATMUL = MatmulKernels()


def scaled_dot_product_attention(
    q, k, v, mask=None, dropout=None, *, bias=None, kernels=MATMUL, scale=True, return_weights=True
):
    """`softmax(q k^T / sqrt(d_k) + mask * large_negative) v` (paper section 3.2.1), the one
    attention of the package: over whole sequences, and over a cache layout's keys and values.

    Args:
      q, k, v: `(..., len_q, depth)`, `(..., len_k, depth)` and `(..., len_k, depth_v)`.
      mask, bias: optional float mask (**1.0 = masked**) and additive bias, broadcastable to
        `(..., len_q, len_k)`.
      dropout: optional callable on the weights before they weight the values.
      kernels: the products and reductions for the shapes of `q`, `k`, `v` (a cache layout).
      scale: divide the logits by `sqrt(depth)`; False when `q` was scaled beforehand.
      return_weights: False: no weights (None), the softmax written out as `exp(logits - max)
        / sum` (oneDNN's `Softmax` is slow at one row), in float32 for half types.

    Returns:
      `(output, weights)`: `(..., len_q, depth_v)` and `(..., len_q, len_k)` (rows sum to 1).
    """
    logits = kernels.scores(q, k)  # (..., len_q, len_k)
    if scale:
        logits = logits / tf.math.sqrt(tf.cast(tf.shape(k)[-1], logits.dtype))
    if mask is not None:
        logits += mask_to_bias(mask, logits.dtype)
    if bias is not None:
        logits += tf.cast(bias, logits.dtype)
    if return_weights:
        weights = tf.nn.softmax(logits, axis=-1)
        dropped = weights if dropout is None else dropout(weights)
        return kernels.weigh(dropped, v), weights
    if logits.dtype in (tf.float16, tf.bfloat16):
        logits = tf.cast(logits, tf.float32)
    exp = tf.exp(logits - kernels.peak(logits))
    if kernels.normalise_after:  # `(.., depth_v)` divisions instead of `(.., len_k)`
        attended = kernels.weigh(exp, v) / kernels.total(exp)
    else:
        attended = kernels.weigh(exp / kernels.total(exp), v)
    return tf.cast(attended, v.dtype), None


@dataclasses.dataclass(frozen=True)
class AttentionCache:
    """What `MultiHeadAttention` attends over from one position per row (a dataclass: Keras
    refuses call arguments that nest tensors with other values): the `layout`; `projection`,
    `decoding_projection`'s query, key and value (self-attention) or query; `key` and `value`,
    the self-attention `LayerCache`'s or the encoder output's; the additive `bias`; the int32
    `position` written first (None: cross-attention); `group`, queries per key/value row."""

    layout: CacheLayout
    projection: tuple[tf.Tensor, tf.Tensor]
    key: tf.Tensor
    value: tf.Tensor
    bias: tf.Tensor
    position: tf.Tensor | None = None
    group: int | tf.Tensor = 1


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class MultiHeadAttention(tf.keras.layers.Layer):
    """Multi-head attention (paper section 3.2.2), head size `d_model / num_heads`.

    Args:
      d_model: model width; the query/key/value/output projections are `d_model x d_model`.
      num_heads: number of heads; must divide `d_model`.
      attention_dropout: dropout on the attention weights after the softmax (training only).

    Call arguments:
      query, value: `(batch, len_q, d_model)` and `(batch, len_v, d_model)`.
      key: optional `(batch, len_v, d_model)`; by default `value`.
      attention_mask: optional float mask broadcastable to `(batch, num_heads, len_q, len_k)`,
        **1.0 = masked** (not `mask`: Keras takes a `mask` argument for an implicit Keras mask).
      training: attention dropout on when True.
      cache: an `AttentionCache`: `query` is `(rows, d_model)`, one position per row; `value`,
        `key` and `attention_mask` are unused.

    Returns:
      `(output, weights)`: `(batch, len_q, d_model)` and `(batch, num_heads, len_q, len_k)`
      (before dropout: rows sum to 1); with `cache`, `(rows, d_model)` and the cache.

    Example:
      >>> mha = MultiHeadAttention(d_model=8, num_heads=2)
      >>> [t.shape for t in mha(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))]
      [TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 4])]
    """

    def __init__(self, *, d_model: int, num_heads: int, attention_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise InvalidValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})."
            )
        self.d_model, self.num_heads, self.depth = d_model, num_heads, d_model // num_heads
        self.attention_dropout = attention_dropout
        dense = {"dtype": self.dtype_policy}
        self.wq = tf.keras.layers.Dense(d_model, name="query", **dense)
        self.wk = tf.keras.layers.Dense(d_model, name="key", **dense)
        self.wv = tf.keras.layers.Dense(d_model, name="value", **dense)
        self.wo = tf.keras.layers.Dense(d_model, name="output", **dense)
        # A rate of 0 makes a Dropout with no seed variable: checkpoints keep their contents.
        self.attention_dropout_layer = tf.keras.layers.Dropout(attention_dropout, **dense)

    def split_heads(self, x):
        """`(batch, len, d_model)` -> `(batch, num_heads, len, depth)`."""
        batch = tf.shape(x)[0]
        x = tf.reshape(x, (batch, -1, self.num_heads, self.depth))
        return tf.transpose(x, (0, 2, 1, 3))

    def build(self, *args, **kwargs):
        # Explicit builds: Keras 3 would otherwise trace `call` symbolically to find the weights,
        # once per nesting level (seconds per model on a CPU).
        for dense in (self.wq, self.wk, self.wv, self.wo):
            dense.build((None, None, self.d_model))
        self.built = True

    def call(self, query, value=None, key=None, *, attention_mask=None, training=None, cache=None):
        if cache is not None:
            attended, weights = self._attend_cached(query, cache)  # (rows, d_model), cache
        else:
            q = self.split_heads(self.wq(query))  # (batch, heads, len_q, depth)
            k = self.split_heads(self.wk(value if key is None else key))  # (.., len_k, depth)
            v = self.split_heads(self.wv(value))
            dropout = functools.partial(self.attention_dropout_layer, training=training)
            attended, weights = scaled_dot_product_attention(q, k, v, attention_mask, dropout)
            attended = tf.transpose(attended, (0, 2, 1, 3))  # (batch, len_q, heads, depth)
            attended = tf.reshape(attended, (tf.shape(attended)[0], -1, self.d_model))
        return self.wo(attended), weights

    def _attend_cached(self, x, cache: AttentionCache):
        layout, projected = cache.layout, dense(x, cache.projection)  # (rows, d or 3 d)
        q, keys, values = projected, cache.key, cache.value
        if cache.position is not None:  # self-attention: the position joins the cache first
            q, k, v = tf.split(projected, 3, axis=-1)
            keys = layout.write(keys, k, cache.position)
            values = layout.write(values, v, cache.position)
            cache = dataclasses.replace(cache, key=keys, value=values)
        q, keys, values, bias = layout.read(q, keys, values, cache.bias, cache.group)
        attended, _ = scaled_dot_product_attention(
            q, keys, values, bias=bias, kernels=layout, scale=False, return_weights=False
        )
        return tf.reshape(attended, (-1, self.d_model)), cache  # heads contiguous: no transpose

    def decoding_projection(self, layout, *names: str) -> tuple[tf.Tensor, tf.Tensor]:
        """`names` ("query", "key", "value") as one `(kernel, bias)` in the compute dtype, read
        once per decoding call, query and key columns in `layout.arrange`'s order; the query
        scaled by `1 / sqrt(depth)` (the scores' scale; bit-identical for a `depth` power of 4)."""
        scale = {"query": 1.0 / math.sqrt(self.depth), "key": 1.0, "value": 1.0}
        dense = {"query": self.wq, "key": self.wk, "value": self.wv}

        def column(name, weight):
            column = tf.cast(getattr(dense[name], weight), self.compute_dtype) * scale[name]
            return column if name == "value" else layout.arrange(column)

        return tuple(
            tf.concat([column(name, weight) for name in names], axis=-1)
            for weight in ("kernel", "bias")
        )

    def get_config(self):
        sizes = {"d_model": self.d_model, "num_heads": self.num_heads}
        return {**super().get_config(), **sizes, "attention_dropout": self.attention_dropout}


def dense(x, projection):
    """`x kernel + bias` for a 2-D `x`, `projection = (kernel, bias)` (MatMul + BiasAdd)."""
    kernel, bias = projection
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)
