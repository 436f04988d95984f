"""The decoder layer and the decoder stack, with a lean one-token step for decoding."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.layers.attention import dense_step, read_weight
from tf_transformer.layers.stack import Stack, SublayerBlock
from tf_transformer.layers.xla_step import STEP_LAYOUTS, heads_minor


def layer_norm_step(x, norm):
    """`norm` (a Keras LayerNormalization over the last axis) with its weights as tensors.

    Keras' own formula (`tf.nn.moments`, `inv = rsqrt(var + eps) * gamma`,
    `x * inv + (beta - mean * inv)`), in at least float32 as Keras computes it, in 10 ops.

    Args:
      x: `(rows, d_model)`.
      norm: `{"gamma", "beta", "epsilon"}` from `norm_weights`.
    """
    dtype = x.dtype
    if dtype in (tf.float16, tf.bfloat16):
        x = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
    inv = tf.math.rsqrt(variance + norm["epsilon"]) * norm["gamma"]
    return tf.cast(x * inv + (norm["beta"] - mean * inv), dtype)


def norm_weights(norm) -> dict[str, tf.Tensor]:
    """A LayerNormalization's gamma, beta and epsilon as float32 tensors for `layer_norm_step`."""
    return {
        "gamma": read_weight(norm.gamma, tf.float32),
        "beta": read_weight(norm.beta, tf.float32),
        "epsilon": tf.constant(norm.epsilon, tf.float32),
    }


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class DecoderLayer(SublayerBlock):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (section 3.1).

    Each block has dropout, a residual connection and LayerNorm; post-norm by default,
    pre-norm with `norm_first=True`. Masks use **1.0 = masked**. `step` is the same layer for
    one decoded position with a key/value cache (inference only: no dropout).

    Args:
      d_model, num_heads, dff, dropout_rate: as in EncoderLayer.
      norm_first, attention_dropout, activation_dropout: as in EncoderLayer.

    Call arguments:
      x: `(batch, tgt_len, d_model)`.
      context: `(batch, src_len, d_model)` encoder output.
      self_mask: `(batch, 1, tgt_len, tgt_len)` look-ahead + target padding mask.
      cross_mask: `(batch, 1, 1, src_len)` source padding mask.
      training: dropout on when True.

    Returns:
      `(x, self_weights, cross_weights)`.

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

    def call(self, x, context, *, self_mask=None, cross_mask=None, training=None):
        # Masked self-attention block.
        h = self.norm1(x) if self.norm_first else x
        attended, self_weights = self.self_attention(
            h, h, attention_mask=self_mask, training=training
        )
        x = x + self.dropout1(attended, training=training)
        if not self.norm_first:
            x = self.norm1(x)
        # Cross-attention block: queries from the decoder, keys/values from the encoder.
        h = self.norm2(x) if self.norm_first else x
        attended, cross_weights = self.cross_attention(
            h, context, attention_mask=cross_mask, training=training
        )
        x = x + self.dropout2(attended, training=training)
        if not self.norm_first:
            x = self.norm2(x)
        # Feed-forward block.
        h = self.norm3(x) if self.norm_first else x
        x = x + self.dropout3(self.ffn(h, training=training), training=training)
        if not self.norm_first:
            x = self.norm3(x)
        return x, self_weights, cross_weights

    # One-token decoding.

    def step_weights(self, *, layout="graph") -> dict:
        """Every weight `step` reads, as tensors (read once per decoding call)."""
        dtype = self.compute_dtype
        attention_weights = STEP_LAYOUTS[layout].step_weights
        return {
            "self_attention": attention_weights(self.self_attention, fuse_qkv=True),
            "cross_attention": attention_weights(self.cross_attention, fuse_qkv=False),
            "inner_kernel": read_weight(self.ffn.inner.kernel, dtype),
            "inner_bias": read_weight(self.ffn.inner.bias, dtype),
            "outer_kernel": read_weight(self.ffn.outer.kernel, dtype),
            "outer_bias": read_weight(self.ffn.outer.bias, dtype),
            "norms": [norm_weights(getattr(self, f"norm{i}")) for i in (1, 2, 3)],
        }

    def step(
        self,
        x,
        weights,
        cache,
        cross,
        *,
        slot,
        self_bias,
        cross_bias,
        beam_size=1,
        layout="graph",
        history=None,
    ):
        """The layer for one decoded position (no dropout), on 2-D `(rows, d_model)` inputs.

        Args:
          x: `(rows, d_model)`, `rows = batch * beam_size`, sentence-major.
          weights: `step_weights()`.
          cache: `{"key", "value"}` self-attention cache `(rows, heads, cache_len, depth)`.
          cross: `{"key", "value"}` cross-attention keys/values `(batch, 1, heads, src_len,
            depth)`, one per sentence (see `Decoder.initial_cache`).
          slot, self_bias: as in `MultiHeadAttention.self_attention_step`.
          cross_bias: `(batch, 1, 1, 1, src_len)` additive source padding bias.
          beam_size: rows per sentence.
          layout: "graph" (the shapes above) or "xla" (heads merged: the shapes of
            `xla_step.self_attention_step` / `cross_attention_step`).
          history: where each row's earlier positions are (`xla_step.self_attention_step`;
            "xla" layout only); None: in the row itself.

        Returns:
          `(x, cache)`: `(rows, d_model)` and the updated self-attention cache.
        """
        _, self_step, cross_step = STEP_LAYOUTS[layout]
        norm1, norm2, norm3 = weights["norms"]
        # Masked self-attention block.
        h = layer_norm_step(x, norm1) if self.norm_first else x
        extra = {} if history is None else {"history": history}
        attended, cache = self_step(
            self.self_attention, h, weights["self_attention"], cache, slot, self_bias, **extra
        )
        x = x + attended
        if not self.norm_first:
            x = layer_norm_step(x, norm1)
        # Cross-attention block.
        h = layer_norm_step(x, norm2) if self.norm_first else x
        x = x + cross_step(
            self.cross_attention,
            h,
            weights["cross_attention"],
            cross["key"],
            cross["value"],
            cross_bias,
            beam_size=beam_size,
        )
        if not self.norm_first:
            x = layer_norm_step(x, norm2)
        # Feed-forward block.
        h = layer_norm_step(x, norm3) if self.norm_first else x
        h = tf.nn.relu(dense_step(h, weights["inner_kernel"], weights["inner_bias"]))
        x = x + dense_step(h, weights["outer_kernel"], weights["outer_bias"])
        if not self.norm_first:
            x = layer_norm_step(x, norm3)
        return x, cache


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Decoder(Stack):
    """Positional embedding, dropout and `num_layers` DecoderLayers (plus a final norm in pre-norm).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate, norm_first: as in Encoder.
      max_length, positional_layout, attention_dropout, activation_dropout: as in Encoder.
      vocab_size: target vocabulary size.
      word_dropout: probability of zeroing a target token's word embedding (training only).

    Call arguments:
      ids: `(batch, tgt_len)` decoder input ids (START first).
      context: `(batch, src_len, d_model)` encoder output.
      self_mask, cross_mask, training: as in DecoderLayer.

    Returns:
      `(x, attention)`: `(batch, tgt_len, d_model)` and a dict with lists `"self"` and `"cross"`
      of per-layer weights.

    Example:
      >>> dec = Decoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=50)
      >>> y, attention = dec(tf.constant([[2, 7]]), tf.ones((1, 4, 8)))
      >>> y.shape, attention["cross"][0].shape
      (TensorShape([1, 2, 8]), TensorShape([1, 2, 2, 4]))
    """

    layer_class = DecoderLayer
    layers_attribute = "dec_layers"

    def call(self, ids, context, *, self_mask=None, cross_mask=None, training=None):
        x = self.embed(ids, training=training)
        attention = {"self": [], "cross": []}
        for layer in self.stack:
            x, self_w, cross_w = layer(
                x, context, self_mask=self_mask, cross_mask=cross_mask, training=training
            )
            attention["self"].append(self_w)
            attention["cross"].append(cross_w)
        return self.finish(x), attention

    # One-token decoding.

    def initial_cache(self, context, cache_length, *, layout="graph"):
        """The decoding caches: empty self-attention slots, cross-attention keys/values once.

        Args:
          context: `(batch, src_len, d_model)` encoder output.
          cache_length: number of decoder positions the self-attention cache holds.
          layout: "graph" or "xla" (heads merged), as in `DecoderLayer.step`.

        Returns:
          `(self_cache, cross)`: two lists (one entry per layer) of `{"key", "value"}`; the
          self-attention cache is zeros `(batch, num_heads, cache_length, depth)`, the cross
          keys/values `(batch, 1, num_heads, src_len, depth)`: one per sentence, with a beam
          axis of 1 that `MultiHeadAttention.cross_attention_step` broadcasts over the beams.
          With `layout="xla"`: `(batch, cache_length, d_model)` and `(batch, 1, src_len,
          d_model)`, the keys depth-major (see `xla_step`).
        """
        batch, src_len = tf.shape(context)[0], tf.shape(context)[1]
        depth = self.d_model // self.num_heads
        # Every layer's cross keys and values in one matmul and one transpose (each layer's
        # `project_key_value` would be 2 Dense calls and 2 transposes, 8 layers' worth of ops).
        dtype = self.compute_dtype
        dense = [
            d for layer in self.stack for d in (layer.cross_attention.wk, layer.cross_attention.wv)
        ]
        kernel = tf.concat([read_weight(d.kernel, dtype) for d in dense], axis=1)
        bias = tf.concat([read_weight(d.bias, dtype) for d in dense], axis=0)
        projected = dense_step(tf.reshape(context, (-1, self.d_model)), kernel, bias)
        if layout == "xla":  # heads merged, keys depth-major
            shape = (batch, 1, src_len, len(dense), self.d_model)
            keys_values = tf.unstack(tf.reshape(projected, shape), num=len(dense), axis=3)
            keys_values[::2] = [heads_minor(key, self.num_heads) for key in keys_values[::2]]
            zeros = tf.zeros((batch, cache_length, self.d_model), context.dtype)
        else:
            shape = (batch, src_len, 1, len(dense), self.num_heads, depth)
            # (2 layers, batch, 1, heads, src, depth)
            keys_values = tf.unstack(tf.transpose(tf.reshape(projected, shape), (3, 0, 2, 4, 1, 5)))
            zeros = tf.zeros((batch, self.num_heads, cache_length, depth), context.dtype)
        self_cache = [{"key": zeros, "value": zeros} for _ in self.stack]
        cross = [
            {"key": keys_values[2 * i], "value": keys_values[2 * i + 1]}
            for i in range(len(self.stack))
        ]
        return self_cache, cross

    def step_weights(self, *, layout="graph") -> dict:
        """Every weight `step` reads, as tensors in the compute dtype (once per decoding call)."""
        dtype = self.compute_dtype
        return {
            "embeddings": read_weight(self.embedding.embedding.embeddings, dtype),
            "scale": tf.constant(float(self.d_model) ** 0.5, dtype),
            "positions": tf.cast(self.embedding.pos_encoding, dtype),
            "layers": [layer.step_weights(layout=layout) for layer in self.stack],
            "final_norm": None if self.final_norm is None else norm_weights(self.final_norm),
        }

    def step(self, ids, position, weights, cache, cross, **options):
        """The decoder for one position: `(rows,)` ids -> `(rows, d_model)`, no dropout.

        Args:
          ids: int `(rows,)` the tokens at `position`.
          position: scalar int32, below `max_length` (the caller checks it once).
          weights: `step_weights()`.
          cache, cross: the lists of `initial_cache` (the self-attention one with `rows` rows).
          **options: `DecoderLayer.step`'s keyword arguments (`slot`, `self_bias`,
            `cross_bias`, `beam_size`, `layout`, `history`), the same for every layer.

        Returns:
          `(x, cache)`.
        """
        # Scaled embedding plus the position's row of the sinusoid table (as `embed`).
        x = tf.gather(weights["embeddings"], ids) * weights["scale"]  # (rows, d_model)
        x = x + tf.gather(weights["positions"], position)
        new_cache = []
        for layer, layer_weights, layer_cache, layer_cross in zip(
            self.stack, weights["layers"], cache, cross, strict=True
        ):
            x, layer_cache = layer.step(x, layer_weights, layer_cache, layer_cross, **options)
            new_cache.append(layer_cache)
        if weights["final_norm"] is not None:
            x = layer_norm_step(x, weights["final_norm"])
        return x, new_cache
