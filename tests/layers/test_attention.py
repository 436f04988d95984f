import numpy as np
import tensorflow as tf

from tf_transformer.layers import MultiHeadAttention, scaled_dot_product_attention


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


def test_incremental_cache_equals_full_causal_attention():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = tf.random.normal((2, 5, 8), seed=2)
    causal = 1.0 - tf.linalg.band_part(tf.ones((5, 5)), -1, 0)
    full, _ = mha(x, x, attention_mask=causal)
    zeros = tf.zeros((2, 2, 5, 4))
    cache = {"key": zeros, "value": zeros}
    for t in range(5):
        step_mask = causal[t][tf.newaxis, tf.newaxis, tf.newaxis, :]
        out, _, cache = mha(
            x[:, t : t + 1], x[:, t : t + 1], attention_mask=step_mask, cache=cache, cache_index=t
        )
        np.testing.assert_allclose(out.numpy()[:, 0], full.numpy()[:, t], atol=1e-5)


def test_static_cache_reuses_precomputed_keys_and_values():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    q, memory = tf.random.normal((1, 3, 8), seed=3), tf.random.normal((1, 4, 8), seed=4)
    direct, _ = mha(q, memory)
    key, value = mha.project_key_value(memory)
    cached, _, _ = mha(q, None, cache={"key": key, "value": value})
    np.testing.assert_allclose(cached.numpy(), direct.numpy(), atol=1e-6)
