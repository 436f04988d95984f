"""The LiteRT export's cache layout: `GraphLayout`'s storage, a position written as LiteRT can."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla  # XlaDynamicUpdateSlice (no public wrapper)

from tf_transformer.layers.kv_cache import GraphLayout


class LiteRTLayout(GraphLayout):
    """`GraphLayout`, a position written with XLA's dynamic update slice (LiteRT's builtin
    DYNAMIC_UPDATE_SLICE; a scatter converts to arithmetic over the whole cache). TensorFlow runs
    it only under XLA: the layout is for conversion (`backends.litert.export`)."""

    def write(self, storage, x, step):
        update = tf.reshape(x, (-1, 1, self.num_heads, 1, self.depth))
        return xla.dynamic_update_slice(storage, update, tf.cast(step, tf.int32) * [0, 0, 0, 1, 0])
