import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.inference.decoding.cached_decode import LAYOUTS
from tf_transformer.layers.kv_cache import _length_dims


def test_xla_layout_arranges_head_major_columns_depth_major():
    # 2 heads of depth 3: columns h0d0 h0d1 h0d2 h1d0 h1d1 h1d2 -> h0d0 h1d0 h0d1 h1d1 ...
    x = tf.constant([[0, 1, 2, 10, 11, 12]])
    layout = LAYOUTS["xla"](num_heads=2, d_model=6)
    np.testing.assert_array_equal(layout.arrange(x).numpy(), [[0, 10, 1, 11, 2, 12]])
    np.testing.assert_array_equal(layout.arrange(x[0]).numpy(), [0, 10, 1, 11, 2, 12])
    assert LAYOUTS["graph"](num_heads=2, d_model=6).arrange(x) is x


@pytest.mark.parametrize(
    "length, dims", [(6, [6]), (32, [32]), (40, [2, 20]), (128, [4, 32]), (37, [37])]
)
def test_length_dims_splits_long_lengths_into_axes_of_at_most_32(length, dims):
    assert _length_dims(tf.zeros((1, length)), 1) == dims


@pytest.mark.parametrize("name", ["graph", "xla"])
def test_a_slot_writes_one_position_of_every_row(name):
    layout = LAYOUTS[name](num_heads=2, d_model=4)
    key, _ = layout.empty(3, 5, tf.float32)
    rows = tf.reshape(tf.range(1.0, 13.0), (3, 4))  # row r: 4r+1 .. 4r+4
    written = layout.write(key, rows, tf.constant(2)).numpy()
    if name == "graph":  # (rows, 1, heads, len, depth): the heads' halves at position 2
        np.testing.assert_array_equal(written[:, 0, :, 2].reshape(3, 4), rows.numpy())
        written[:, 0, :, 2] = 0
    else:  # (rows, len, d_model)
        np.testing.assert_array_equal(written[:, 2], rows.numpy())
        written[:, 2] = 0
    assert not written.any()  # nothing else written
