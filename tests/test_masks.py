import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.masks import (
    create_look_ahead_mask,
    create_masks,
    create_padding_mask,
    large_negative,
    mask_to_bias,
)


def test_padding_mask_marks_pad_positions():
    mask = create_padding_mask(tf.constant([[7, 6, 0, 0], [1, 2, 3, 0]]))
    assert mask.shape == (2, 1, 1, 4)
    assert mask.dtype == tf.float32
    np.testing.assert_array_equal(mask.numpy()[:, 0, 0], [[0, 0, 1, 1], [0, 0, 0, 1]])


def test_look_ahead_mask_is_strict_upper_triangle():
    expected = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    np.testing.assert_array_equal(create_look_ahead_mask(3).numpy(), expected)


def test_combined_mask_is_max_of_look_ahead_and_target_padding():
    padding, combined = create_masks(tf.constant([[5, 0]]), tf.constant([[2, 9, 0]]))
    np.testing.assert_array_equal(padding.numpy()[0, 0, 0], [0, 1])
    assert combined.shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(combined.numpy()[0, 0], [[0, 1, 1], [0, 0, 1], [0, 0, 1]])


@pytest.mark.parametrize(
    "dtype, value", [(tf.float32, -1e9), (tf.bfloat16, -1e9), (tf.float16, -3e4)]
)
def test_mask_bias_is_finite_in_every_dtype(dtype, value):
    assert large_negative(dtype) == value
    bias = mask_to_bias(tf.constant([0.0, 1.0]), dtype)
    assert bias.dtype == dtype
    values = tf.cast(bias, tf.float32).numpy()
    assert values[0] == 0.0 and np.isfinite(values[1]) and values[1] < -1e4


def test_large_negative_rejects_integer_dtype():
    with pytest.raises(ValueError, match="int32"):
        large_negative(tf.int32)
