"""The cache layout of the LiteRT export's decoder step: one dynamic update slice per write.

A LiteRT step (`backends.litert.export`) takes each layer's self-attention keys and values as
fixed-size inputs `(rows, 1, heads, cache_length, depth)`, writes the position it decodes with
LiteRT's builtin DYNAMIC_UPDATE_SLICE (a `tensor_scatter_nd_update` converts to scatters and
arithmetic over the whole cache) and hands back only that position, which the runtime writes
into its input buffers before the next step.

(Measured, tutorial preset, one thread: the update slice copies the input cache, about 0.05 ms
of a 0.12 ms int8 step at one row; reading the cache untouched and the new position beside it,
with a concatenation of the logits, was no faster, so the write stays one op.)
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla  # XlaDynamicUpdateSlice (no public wrapper)

from tf_transformer.layers.cache_layout import KVCache
from tf_transformer.layers.kv_cache import GraphLayout


class LiteRTLayout(GraphLayout):
    """`GraphLayout`'s storage and batched matmuls; `where` is the start `[0, 0, 0, step, 0]`
    of a dynamic update slice; no tables. TensorFlow runs the op only under XLA: the layout is
    for conversion."""

    def empty(self, batch, length, dtype, num_layers, beam_size=1):
        zeros = self.storage(batch, length, dtype)
        return KVCache([(zeros, zeros)] * num_layers)

    def locate(self, cache, step):
        zero = tf.zeros([], tf.int32)
        return cache, tf.stack([zero, zero, zero, tf.cast(step, tf.int32), zero])

    def write(self, storage, x, where):
        update = tf.reshape(x, (-1, 1, self.num_heads, 1, self.depth))
        return xla.dynamic_update_slice(storage, update, where)

    def read(self, q, keys, values, bias, group, where=None):
        """As `GraphLayout.read`; for self-attention, the bias row (the export's cache length)
        cut to the cache given: a runtime may hold fewer positions than the export."""
        q, keys, values, bias = super().read(q, keys, values, bias, group, where)
        if where is not None:  # tf.slice: a Python slice of a dynamic shape needs Flex
            rank = bias.shape.rank
            size = tf.concat([tf.fill([rank - 1], -1), tf.shape(keys)[3:4]], axis=0)
            bias = tf.slice(bias, tf.zeros([rank], tf.int32), size)
        return q, keys, values, bias

    def written(self, storage, where):
        """The position `where` wrote, `(rows, d_model)` (what the exported step hands back)."""
        return tf.reshape(tf.gather(storage, where[3], axis=3), (-1, self.d_model))
