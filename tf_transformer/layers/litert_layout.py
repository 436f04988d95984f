"""The cache layout of the LiteRT export's decoder step (`backends.litert.export`, and
docs/serving.md): a position written with LiteRT's builtin DYNAMIC_UPDATE_SLICE (a scatter
converts to arithmetic over the whole cache), handed back alone (`written`)."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla  # XlaDynamicUpdateSlice (no public wrapper)

from tf_transformer.layers.kv_cache import GraphLayout


class LiteRTLayout(GraphLayout):
    """`GraphLayout`, a position written with XLA's dynamic update slice, which TensorFlow runs
    only under XLA: the layout is for conversion."""

    def write(self, storage, x, step):
        update = tf.reshape(x, (-1, 1, self.num_heads, 1, self.depth))
        start = tf.cast(step, tf.int32) * [0, 0, 0, 1, 0]
        return xla.dynamic_update_slice(storage, update, start)

    def read(self, q, keys, values, bias, group):
        """As `GraphLayout.read`; the look-ahead row (self-attention's bias, rank 1) cut to the
        positions given: a runtime may hold fewer than the export's cache length."""
        q, keys, values, bias = super().read(q, keys, values, bias, group)
        if bias.shape.rank == 1:  # tf.slice: a Python slice of a dynamic shape needs Flex
            bias = tf.slice(bias, [0], tf.shape(keys)[3:4])
        return q, keys, values, bias

    def written(self, storage, step):
        """Position `step` of `storage`, `(rows, d_model)` (what the exported step hands back)."""
        return tf.reshape(tf.gather(storage, step, axis=3), (-1, self.d_model))
