import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.layers import FeedForward


def identity_ffn(activation_dropout):
    """A FeedForward with d_model = dff = 4 and identity kernels: `relu(x)`, then dropout."""
    ffn = FeedForward(d_model=4, dff=4, activation_dropout=activation_dropout)
    ffn.build()
    eye, zeros = np.eye(4, dtype="float32"), np.zeros(4, "float32")
    ffn.set_weights([eye, zeros, eye, zeros])
    return ffn


def test_feed_forward_is_relu_between_two_projections():
    ffn = FeedForward(d_model=8, dff=16)
    x = tf.random.normal((2, 5, 8), seed=0)
    ffn.build()
    w1, b1, w2, b2 = ffn.get_weights()
    expected = np.maximum(x.numpy() @ w1 + b1, 0.0) @ w2 + b2
    np.testing.assert_allclose(ffn(x).numpy(), expected, atol=1e-5)


def test_activation_dropout_zeroes_inner_units_and_scales_the_rest():
    ffn = identity_ffn(0.5)
    x = tf.random.uniform((8, 16, 4), 0.5, 1.0, seed=1)  # positive: the ReLU keeps it all
    tf.keras.utils.set_random_seed(0)
    trained = ffn(x, training=True).numpy()
    dropped = trained == 0.0
    np.testing.assert_allclose(trained[~dropped], 2.0 * x.numpy()[~dropped], rtol=1e-6)
    # Units are dropped one by one, not whole positions: about half of the 512.
    assert 0.4 < dropped.mean() < 0.6
    assert not np.all(dropped == dropped[..., :1])


@pytest.mark.parametrize("activation_dropout", [0.0, 0.5])
def test_inference_output_does_not_depend_on_the_rate(activation_dropout):
    x = tf.random.normal((2, 5, 4), seed=2)
    reference = identity_ffn(0.0)(x, training=False).numpy()
    ffn = identity_ffn(activation_dropout)
    np.testing.assert_array_equal(ffn(x, training=False).numpy(), reference)
    if activation_dropout == 0.0:  # no dropout in training either, bit for bit
        np.testing.assert_array_equal(ffn(x, training=True).numpy(), reference)
