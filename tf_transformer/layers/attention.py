"""Scaled dot-product attention and multi-head attention, with lean one-token decoding steps."""

from __future__ import annotations

import math

import tensorflow as tf

from tf_transformer.masks import mask_to_bias


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None):
    """`softmax(q k^T / sqrt(d_k) + mask * large_negative) v` (paper section 3.2.1).

    Args:
      q: `(..., len_q, depth)` queries.
      k: `(..., len_k, depth)` keys.
      v: `(..., len_k, depth_v)` values.
      mask: optional float mask broadcastable to `(..., len_q, len_k)`; **1.0 = masked**.
      dropout: optional callable applied to the weights before they weight the values
        (attention dropout); the returned weights are the ones before it.

    Returns:
      `(output, weights)`: `(..., len_q, depth_v)` and the attention weights
      `(..., len_q, len_k)`, whose rows sum to 1.
    """
    depth = tf.cast(tf.shape(k)[-1], q.dtype)
    logits = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(depth)  # (..., len_q, len_k)
    if mask is not None:
        logits += mask_to_bias(mask, logits.dtype)
    weights = tf.nn.softmax(logits, axis=-1)
    dropped = weights if dropout is None else dropout(weights)
    return tf.matmul(dropped, v), weights


def dense_step(x, kernel, bias):
    """`x kernel + bias` for a 2-D `x` `(rows, in)`: one MatMul and one BiasAdd (which Grappler
    fuses), instead of a Keras Dense call's reshapes for N-D inputs."""
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)


def read_weight(variable, dtype) -> tf.Tensor:
    """The value of a (Keras) variable as a tensor of `dtype`."""
    return tf.cast(tf.convert_to_tensor(variable), dtype)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class MultiHeadAttention(tf.keras.layers.Layer):
    """Multi-head attention (paper section 3.2.2), head size `d_model / num_heads`.

    Masks follow the tutorial's convention: **1.0 = masked**.

    `call` attends a whole sequence (training, teacher forcing, the encoder). Decoding one token
    at a time uses `step_weights` (once per decoding call) with `self_attention_step` or
    `cross_attention_step` (once per token): the same math on 2-D `(rows, d_model)` inputs.

    Args:
      d_model: model width; the query/key/value/output projections are `d_model x d_model`.
      num_heads: number of heads; must divide `d_model`.
      attention_dropout: dropout on the attention weights after the softmax, in `call` with
        `training=True` only (the decoding steps are inference: no dropout).

    Call arguments:
      query: `(batch, len_q, d_model)`.
      value: `(batch, len_v, d_model)`; also the key unless `key` is given.
      key: optional `(batch, len_v, d_model)`.
      attention_mask: optional float mask broadcastable to `(batch, num_heads, len_q, len_k)`.
        (Not named `mask`: Keras treats a `mask` argument as an implicit Keras mask.)
      training: attention dropout on when True.

    Returns:
      `(output, weights)`: `output` is `(batch, len_q, d_model)` and `weights`
      `(batch, num_heads, len_q, len_k)` (before attention dropout: rows sum to 1).

    Example:
      >>> mha = MultiHeadAttention(d_model=8, num_heads=2)
      >>> out, w = mha(tf.ones((1, 3, 8)), tf.ones((1, 4, 8)))
      >>> out.shape, w.shape
      (TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 4]))
    """

    def __init__(self, *, d_model: int, num_heads: int, attention_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads}).")
        self.d_model = d_model
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.depth = d_model // num_heads
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

    def call(self, query, value, key=None, *, attention_mask=None, training=None):
        q = self.split_heads(self.wq(query))  # (batch, heads, len_q, depth)
        k, v = self.project_key_value(value, key)  # (batch, heads, len_k, depth)
        attended, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            mask=attention_mask,
            dropout=lambda w: self.attention_dropout_layer(w, training=training),
        )
        attended = tf.transpose(attended, (0, 2, 1, 3))  # (batch, len_q, heads, depth)
        attended = tf.reshape(attended, (tf.shape(attended)[0], -1, self.d_model))
        return self.wo(attended), weights

    # One-token decoding.

    def step_weights(self, *, fuse_qkv: bool) -> dict[str, tf.Tensor]:
        """The projections as tensors in the compute dtype, for `*_attention_step`.

        Read once per decoding call (outside the decoding loop). The query kernel and bias are
        scaled by `1 / sqrt(depth)`, which moves the logits' scale onto the queries (the same
        product; bit-identical when `depth` is a power of 4, e.g. 16 or 64). With `fuse_qkv`,
        the query, key and value kernels are concatenated into one `(d_model, 3 d_model)` kernel
        for one matmul per step; the concatenation is computed here, so checkpoints and the
        Keras weights keep their separate layout.

        Returns:
          `{"qkv_kernel", "qkv_bias"}` (fused) or `{"query_kernel", "query_bias"}`, plus
          `{"output_kernel", "output_bias"}`.
        """
        dtype = self.compute_dtype
        scale = tf.constant(1.0 / math.sqrt(self.depth), dtype)
        query = (
            read_weight(self.wq.kernel, dtype) * scale,
            read_weight(self.wq.bias, dtype) * scale,
        )
        weights = {
            "output_kernel": read_weight(self.wo.kernel, dtype),
            "output_bias": read_weight(self.wo.bias, dtype),
        }
        if fuse_qkv:
            dense = (self.wk, self.wv)
            kernels = [query[0]] + [read_weight(d.kernel, dtype) for d in dense]
            biases = [query[1]] + [read_weight(d.bias, dtype) for d in dense]
            weights["qkv_kernel"] = tf.concat(kernels, axis=1)  # (d_model, 3 d_model)
            weights["qkv_bias"] = tf.concat(biases, axis=0)
        else:
            weights["query_kernel"], weights["query_bias"] = query
        return weights

    def self_attention_step(self, x, weights, cache, slot, bias):
        """Causal self-attention of one position over a fixed-size key/value cache.

        The position's key and value are written into their cache slot with a scatter (in place
        under XLA), then its query attends over the whole cache; `bias` hides the slots after it.

        Args:
          x: `(rows, d_model)` the position's input.
          weights: `step_weights(fuse_qkv=True)`.
          cache: `{"key", "value"}`, each `(rows, num_heads, cache_len, depth)`.
          slot: int32 `(rows, num_heads, 3)` scatter indices `[row, head, position]`.
          bias: additive `(cache_len,)`: 0 up to the position, a large negative after it.

        Returns:
          `(output, cache)`: `(rows, d_model)` and the cache with this position written.
        """
        qkv = dense_step(x, weights["qkv_kernel"], weights["qkv_bias"])  # (rows, 3 d_model)
        qkv = tf.reshape(qkv, (-1, 3, self.num_heads, self.depth))
        q, k, v = tf.unstack(qkv, axis=1)  # (rows, heads, depth) each
        cache = {
            "key": tf.tensor_scatter_nd_update(cache["key"], slot, k),
            "value": tf.tensor_scatter_nd_update(cache["value"], slot, v),
        }
        q = q[:, :, tf.newaxis, :]  # (rows, heads, 1, depth)
        attended = _attend(q, cache["key"], cache["value"], bias)  # (rows, heads, 1, depth)
        attended = tf.reshape(attended, (-1, self.d_model))  # heads are contiguous: no transpose
        return dense_step(attended, weights["output_kernel"], weights["output_bias"]), cache

    def cross_attention_step(self, x, weights, key, value, bias, *, beam_size: int = 1):
        """Attention of one position (per beam) over precomputed, per-sentence keys and values.

        Args:
          x: `(batch * beam_size, d_model)`, sentence-major (row `b * beam_size + i`).
          weights: `step_weights(fuse_qkv=False)`.
          key, value: `(batch, 1, num_heads, src_len, depth)`: `project_key_value`'s, once per
            sentence, with a beam axis of 1 that the batched matmuls broadcast over the beams
            (nothing is tiled, gathered or transposed per beam).
          bias: additive `(batch, 1, 1, 1, src_len)` (source padding).
          beam_size: rows per sentence.

        Returns:
          `(batch * beam_size, d_model)`.
        """
        q = dense_step(x, weights["query_kernel"], weights["query_bias"])
        q = tf.reshape(q, (-1, beam_size, self.num_heads, 1, self.depth))
        attended = _attend(q, key, value, bias)  # (batch, beam, heads, 1, depth)
        attended = tf.reshape(attended, (-1, self.d_model))
        return dense_step(attended, weights["output_kernel"], weights["output_bias"])

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            num_heads=self.num_heads,
            attention_dropout=self.attention_dropout,
        )
        return config


def _attend(q, k, v, bias):
    """`softmax(q k^T + bias) v` with pre-scaled queries `(..., len_q, depth)`.

    Written for one-token steps on a CPU: with oneDNN on (TensorFlow's default on x86), the
    graph rewrite turns `BatchMatMulV2` and `Softmax` into oneDNN primitives that cost
    ~40 µs each at these sizes (measured; 12 of them made most of a 2 ms step).
    `BatchMatMulV3` (the same product, not rewritten) and the softmax written out run as Eigen
    kernels in a few µs, and XLA compiles both as usual.
    """
    logits = _batch_matmul(q, k, adj_y=True) + bias  # (..., len_q, len_k)
    if logits.dtype in (tf.float16, tf.bfloat16):  # as TF's Softmax kernel: in float32
        logits = tf.cast(logits, tf.float32)
    logits = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    weights = logits / tf.reduce_sum(logits, axis=-1, keepdims=True)
    return _batch_matmul(tf.cast(weights, v.dtype), v)


def _batch_matmul(x, y, *, adj_y=False):
    if x.dtype == tf.float16:  # BatchMatMulV3 has no float16 CPU kernel (and oneDNN no float16)
        return tf.matmul(x, y, adjoint_b=adj_y)
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype, adj_y=adj_y)
