import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.layers import MultiHeadAttention
from tf_transformer.layers.xla_step import (
    _length_dims,
    cross_attention_step,
    heads_minor,
    self_attention_step,
    step_weights,
)


def test_heads_minor_reorders_head_major_columns_depth_major():
    # 2 heads of depth 3: columns h0d0 h0d1 h0d2 h1d0 h1d1 h1d2 -> h0d0 h1d0 h0d1 h1d1 ...
    x = tf.constant([[0, 1, 2, 10, 11, 12]])
    np.testing.assert_array_equal(heads_minor(x, 2).numpy(), [[0, 10, 1, 11, 2, 12]])
    np.testing.assert_array_equal(heads_minor(x[0], 2).numpy(), [0, 10, 1, 11, 2, 12])


@pytest.mark.parametrize(
    "length, dims", [(6, [6]), (32, [32]), (40, [2, 20]), (128, [4, 32]), (37, [37])]
)
def test_length_dims_splits_long_lengths_into_axes_of_at_most_32(length, dims):
    assert _length_dims(tf.zeros((1, length)), 1) == dims


def step_slots(rows, position):
    """Scatter indices `[row, position]` `(rows, 2)`."""
    return tf.constant([[row, position] for row in range(rows)], tf.int32)


@pytest.mark.parametrize("length", [5, 40])  # 40: the length as two axes (2, 20)
def test_self_attention_step_equals_full_causal_attention(length):
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = tf.random.normal((2, length, 8), seed=2)
    causal = 1.0 - tf.linalg.band_part(tf.ones((length, length)), -1, 0)
    full, _ = mha(x, x, attention_mask=causal)
    weights = step_weights(mha, fuse_qkv=True)
    zeros = tf.zeros((2, length, 8))
    cache = {"key": zeros, "value": zeros}
    for t in range(length):
        bias = causal[t] * -1e9
        out, cache = self_attention_step(mha, x[:, t], weights, cache, step_slots(2, t), bias)
        np.testing.assert_allclose(out.numpy(), full.numpy()[:, t], atol=1e-5)
    # The cache holds every position's projected key (depth-major) and value, heads merged.
    keys = mha.wk(x)
    np.testing.assert_allclose(cache["key"].numpy(), heads_minor(keys, 2).numpy(), atol=1e-6)
    np.testing.assert_allclose(cache["value"].numpy(), mha.wv(x).numpy(), atol=1e-6)


@pytest.mark.parametrize("src_len", [4, 40])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_cross_attention_step_equals_attention_over_the_memory(beam_size, src_len):
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    memory = tf.random.normal((2, src_len, 8), seed=4)
    q = tf.random.normal((2 * beam_size, 8), seed=3)  # beams of sentence b: rows b * beam + i
    mask = np.zeros((2, src_len), "float32")
    mask[1, src_len // 2 :] = 1.0
    direct, _ = mha(tf.reshape(q, (2, beam_size, 8)), memory, attention_mask=mask[:, None, None])
    cached = cross_attention_step(
        mha,
        q,
        step_weights(mha, fuse_qkv=False),
        heads_minor(mha.wk(memory), 2)[:, tf.newaxis],
        mha.wv(memory)[:, tf.newaxis],
        (mask * -1e9)[:, None, None, None, :],
        beam_size=beam_size,
    )
    np.testing.assert_allclose(cached.numpy(), tf.reshape(direct, (-1, 8)).numpy(), atol=1e-6)
