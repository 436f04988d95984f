import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.inference.decoding.cached_decode import LAYOUTS
from tf_transformer.layers import MultiHeadAttention, scaled_dot_product_attention
from tf_transformer.layers.attention import AttentionCache, dense


def test_scaled_dot_product_attention_matches_numpy():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=s).astype("float32") for s in [(2, 3, 4), (2, 5, 4), (2, 5, 6)])
    mask = np.zeros((2, 1, 5), "float32")
    mask[:, :, 3:] = 1.0
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    logits = q @ k.transpose(0, 2, 1) / 2.0 - 1e9 * mask
    expected_w = np.exp(logits - logits.max(-1, keepdims=True))
    expected_w /= expected_w.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights.numpy(), expected_w, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), expected_w @ v, atol=1e-5)


def test_weights_rows_sum_to_one_and_masked_weights_vanish():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = tf.random.normal((2, 4, 8), seed=1)
    mask = tf.constant([0.0, 0.0, 1.0, 1.0])[tf.newaxis, tf.newaxis, tf.newaxis, :]
    _, weights = mha(x, x, attention_mask=mask)
    assert weights.shape == (2, 2, 4, 4)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-6)
    assert weights.numpy()[..., 2:].max() < 1e-6


def test_head_size_is_d_model_over_num_heads():
    mha = MultiHeadAttention(d_model=16, num_heads=4)
    mha(tf.ones((1, 2, 16)), tf.ones((1, 2, 16)))
    # Four 16x16 projections with biases: key_dim = 16 / 4, not 16 per head.
    assert mha.count_params() == 4 * (16 * 16 + 16)
    assert mha.depth == 4


def run_cached(mha, x, layout_name, mask):
    """`mha`'s cached self-attention over `x` `(rows, len, d_model)`, one position at a time;
    returns the outputs `(rows, len, d_model)` and the final cache."""
    rows, length = x.shape[:2]
    layout = LAYOUTS[layout_name](mha.num_heads, mha.d_model)
    projection = mha.decoding_projection(layout, "query", "key", "value")
    cache = AttentionCache(layout, projection, *layout.empty(rows, length, tf.float32), bias=None)
    outputs = []
    for t in range(length):
        cache = dataclasses.replace(cache, bias=mask[t] * -1e9, position=tf.constant(t))
        out, cache = mha(x[:, t], cache=cache)
        outputs.append(out)
    return tf.stack(outputs, axis=1), cache


@pytest.mark.parametrize("length", [5, 40])  # 40: the xla layout splits the length (2, 20)
@pytest.mark.parametrize("layout_name", ["graph", "xla"])
def test_cached_self_attention_equals_full_causal_attention(layout_name, length):
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = tf.random.normal((2, length, 8), seed=2)
    causal = 1.0 - tf.linalg.band_part(tf.ones((length, length)), -1, 0)
    full, _ = mha(x, x, attention_mask=causal)
    cached, cache = run_cached(mha, x, layout_name, causal)
    np.testing.assert_allclose(cached.numpy(), full.numpy(), atol=1e-5)
    # The cache holds every position's projected key and value, in the layout's shapes.
    keys, values = mha.wk(x), mha.wv(x)
    if layout_name == "graph":  # (rows, 1, heads, len, depth)
        keys, values = mha.split_heads(keys)[:, None], mha.split_heads(values)[:, None]
    else:  # (rows, len, d_model), the key columns depth-major
        keys = cache.layout.arrange(keys)
    np.testing.assert_allclose(cache.key.numpy(), keys.numpy(), atol=1e-6)
    np.testing.assert_allclose(cache.value.numpy(), values.numpy(), atol=1e-6)


def test_decoding_projection_is_the_three_kernels_with_the_query_scaled():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    mha.build()
    kernel, _ = mha.decoding_projection(LAYOUTS["graph"](2, 8), "query", "key", "value")
    assert kernel.shape == (8, 24)
    np.testing.assert_allclose(kernel[:, :8], mha.wq.kernel.numpy() / 2.0)  # 1 / sqrt(depth 4)
    np.testing.assert_array_equal(kernel[:, 8:16], mha.wk.kernel.numpy())
    np.testing.assert_array_equal(kernel[:, 16:], mha.wv.kernel.numpy())
    # The Keras weights keep their layout: four Dense layers, nothing added.
    assert len(mha.weights) == 8


@pytest.mark.parametrize("src_len", [4, 40])
@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("layout_name", ["graph", "xla"])
def test_cached_cross_attention_equals_attention_over_the_memory(layout_name, beam_size, src_len):
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    memory = tf.random.normal((2, src_len, 8), seed=4)
    q = tf.random.normal((2 * beam_size, 8), seed=3)  # beams of sentence b: rows b * beam + i
    mask = np.zeros((2, src_len), "float32")
    mask[1, src_len // 2 :] = 1.0
    direct, _ = mha(tf.reshape(q, (2, beam_size, 8)), memory, attention_mask=mask[:, None, None])
    layout = LAYOUTS[layout_name](2, 8)
    keys_values = dense(
        tf.reshape(memory, (-1, 8)), mha.decoding_projection(layout, "key", "value")
    )
    key, value = layout.memory(keys_values, 2, 2)  # once per sentence: never tiled per beam
    bias = (mask * -1e9)[:, None, None, None, :]
    projection = mha.decoding_projection(layout, "query")
    cache = AttentionCache(layout, projection, key, value, bias, group=beam_size)
    cached, _ = mha(q, cache=cache)
    np.testing.assert_allclose(cached.numpy(), tf.reshape(direct, (-1, 8)).numpy(), atol=1e-6)


def test_scaled_dot_product_attention_drops_the_weights_it_applies_not_those_it_returns():
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 3, 4)).astype("float32") for _ in range(3))
    keep_first = np.zeros((3, 3), "float32")
    keep_first[:, 0] = 1.0
    out, weights = scaled_dot_product_attention(q, k, v, dropout=lambda w: w * keep_first)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-6)
    # Only the first key's weight survives: each output row is that weight times v[0].
    expected = weights.numpy()[..., :1] * v[:, np.newaxis, 0]
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-6)


def twin_attention(attention_dropout):
    """A MultiHeadAttention with `attention_dropout` and the weights of one without it."""
    plain = MultiHeadAttention(d_model=8, num_heads=2)
    dropped = MultiHeadAttention(d_model=8, num_heads=2, attention_dropout=attention_dropout)
    plain.build()
    dropped.build()
    dropped.set_weights(plain.get_weights())
    return plain, dropped


def test_attention_dropout_changes_only_training_outputs():
    plain, dropped = twin_attention(0.5)
    x = tf.random.normal((2, 5, 8), seed=6)
    reference, reference_weights = plain(x, x, training=True)  # rate 0: no dropout even here
    inference, inference_weights = dropped(x, x, training=False)
    np.testing.assert_array_equal(inference.numpy(), reference.numpy())
    np.testing.assert_array_equal(inference_weights.numpy(), reference_weights.numpy())
    tf.keras.utils.set_random_seed(0)
    trained, trained_weights = dropped(x, x, training=True)
    assert np.abs(trained.numpy() - reference.numpy()).max() > 1e-3
    # The returned weights are those before dropout: the ones plots show.
    np.testing.assert_array_equal(trained_weights.numpy(), reference_weights.numpy())


def test_zero_attention_dropout_is_bit_identical_in_training():
    plain, dropped = twin_attention(0.0)
    x = tf.random.normal((2, 5, 8), seed=7)
    trained, _ = dropped(x, x, training=True)
    np.testing.assert_array_equal(trained.numpy(), plain(x, x, training=False)[0].numpy())
    # No dropout seed variable either: the weights and checkpoints are the old ones.
    assert len(dropped.variables) == len(plain.variables) == 8


def test_attention_dropout_leaves_cached_attention_alone():
    # Decoding is inference: with a rate, cached attention still equals attention without it.
    _, dropped = twin_attention(0.5)
    x = tf.random.normal((2, 5, 8), seed=8)
    causal = 1.0 - tf.linalg.band_part(tf.ones((5, 5)), -1, 0)
    full, _ = dropped(x, x, attention_mask=causal)
    cached, _ = run_cached(dropped, x, "graph", causal)
    np.testing.assert_allclose(cached.numpy(), full.numpy(), atol=1e-5)
