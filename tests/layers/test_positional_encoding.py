import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.layers import PositionalEmbedding, positional_encoding


def closed_form(pos, i, depth):
    angle = pos / 10000 ** (2 * (i // 2) / depth)
    return np.sin(angle) if i % 2 == 0 else np.cos(angle)


def test_interleaved_table_equals_paper_formula():
    table = positional_encoding(50, 16).numpy()
    expected = np.array([[closed_form(p, i, 16) for i in range(16)] for p in range(50)])
    np.testing.assert_allclose(table, expected, atol=1e-6)


def test_literal_first_rows():
    table = positional_encoding(2, 4).numpy()
    # Row 0: sin(0)=0, cos(0)=1. Row 1: sin(1), cos(1), sin(1/100), cos(1/100).
    np.testing.assert_allclose(
        table, [[0, 1, 0, 1], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)]], atol=1e-7
    )


def test_concat_layout_is_the_tutorial_permutation():
    interleaved = positional_encoding(20, 8).numpy()
    concat = positional_encoding(20, 8, layout="concat").numpy()
    np.testing.assert_allclose(concat[:, :4], interleaved[:, 0::2], atol=1e-7)
    np.testing.assert_allclose(concat[:, 4:], interleaved[:, 1::2], atol=1e-7)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="even"):
        positional_encoding(4, 5)
    with pytest.raises(ValueError, match="layout"):
        positional_encoding(4, 4, layout="spiral")


def test_positional_embedding_scales_and_adds_table():
    layer = PositionalEmbedding(vocab_size=10, d_model=4, max_length=8)
    ids = tf.constant([[3, 4, 5]])
    out = layer(ids).numpy()
    table = layer.embedding.embeddings.numpy()
    expected = table[[3, 4, 5]] * 2.0 + positional_encoding(8, 4).numpy()[:3]
    np.testing.assert_allclose(out[0], expected, atol=1e-6)
    # With an offset the positions shift (incremental decoding).
    np.testing.assert_allclose(layer(ids[:, 2:], offset=2).numpy()[0, 0], expected[2], atol=1e-6)


def test_positional_embedding_refuses_too_long_input():
    layer = PositionalEmbedding(vocab_size=10, d_model=4, max_length=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_length"):
        layer(tf.ones((1, 4), tf.int32))


def test_positional_embedding_keeps_a_static_length_with_a_tensor_offset():
    # A tensor offset must not make the length dynamic: under XLA a dynamic slice of the table is
    # padded to max_length rows, and a one-step decode then costs max_length positions.
    layer = PositionalEmbedding(vocab_size=10, d_model=4, max_length=8)

    @tf.function(autograph=False)
    def step(ids, offset):
        out = layer(ids, offset=offset)
        assert out.shape[1] == 1, out.shape
        return out

    ids = tf.constant([[5]])
    expected = layer(tf.constant([[0, 0, 5]])).numpy()[0, 2]
    np.testing.assert_allclose(step(ids, tf.constant(2)).numpy()[0, 0], expected, atol=1e-6)
