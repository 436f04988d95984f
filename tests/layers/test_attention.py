import numpy as np
import pytest
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


def step_slots(rows, heads, position):
    """Scatter indices `[row, head, position]` `(rows, heads, 3)`."""
    r, h = np.meshgrid(np.arange(rows), np.arange(heads), indexing="ij")
    return tf.constant(np.stack([r, h, np.full_like(r, position)], axis=-1), tf.int32)


def test_self_attention_step_equals_full_causal_attention():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = tf.random.normal((2, 5, 8), seed=2)
    causal = 1.0 - tf.linalg.band_part(tf.ones((5, 5)), -1, 0)
    full, _ = mha(x, x, attention_mask=causal)
    weights = mha.step_weights(fuse_qkv=True)
    zeros = tf.zeros((2, 2, 5, 4))
    cache = {"key": zeros, "value": zeros}
    for t in range(5):
        bias = causal[t] * -1e9
        out, cache = mha.self_attention_step(x[:, t], weights, cache, step_slots(2, 2, t), bias)
        np.testing.assert_allclose(out.numpy(), full.numpy()[:, t], atol=1e-5)
    # The cache holds every position's projected key, written in its slot.
    keys, _ = mha.project_key_value(x)
    np.testing.assert_allclose(cache["key"].numpy(), keys.numpy(), atol=1e-6)


def test_fused_qkv_kernel_is_the_three_kernels_with_the_query_scaled():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    mha.build()
    fused = mha.step_weights(fuse_qkv=True)["qkv_kernel"].numpy()
    assert fused.shape == (8, 24)
    np.testing.assert_allclose(fused[:, :8], mha.wq.kernel.numpy() / 2.0)  # 1 / sqrt(depth 4)
    np.testing.assert_array_equal(fused[:, 8:16], mha.wk.kernel.numpy())
    np.testing.assert_array_equal(fused[:, 16:], mha.wv.kernel.numpy())
    # The Keras weights keep their layout: four Dense layers, nothing added.
    assert len(mha.weights) == 8


@pytest.mark.parametrize("beam_size", [1, 3])
def test_cross_attention_step_equals_attention_over_the_memory(beam_size):
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    memory = tf.random.normal((2, 4, 8), seed=4)
    q = tf.random.normal((2 * beam_size, 8), seed=3)  # beams of sentence b: rows b * beam + i
    mask = tf.constant([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    direct, _ = mha(tf.reshape(q, (2, beam_size, 8)), memory, attention_mask=mask[:, None, None, :])
    key, value = mha.project_key_value(memory)
    cached = mha.cross_attention_step(
        q,
        mha.step_weights(fuse_qkv=False),
        key[:, tf.newaxis],
        value[:, tf.newaxis],
        (mask * -1e9)[:, None, None, None, :],
        beam_size=beam_size,
    )
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


def test_attention_dropout_leaves_the_decoding_steps_alone():
    # The steps are inference: with a rate, they still equal attention without dropout.
    _, dropped = twin_attention(0.5)
    x = tf.random.normal((2, 5, 8), seed=8)
    causal = 1.0 - tf.linalg.band_part(tf.ones((5, 5)), -1, 0)
    full, _ = dropped(x, x, attention_mask=causal)
    weights = dropped.step_weights(fuse_qkv=True)
    zeros = tf.zeros((2, 2, 5, 4))
    cache = {"key": zeros, "value": zeros}
    for t in range(5):
        out, cache = dropped.self_attention_step(
            x[:, t], weights, cache, step_slots(2, 2, t), causal[t] * -1e9
        )
        np.testing.assert_allclose(out.numpy(), full.numpy()[:, t], atol=1e-5)
