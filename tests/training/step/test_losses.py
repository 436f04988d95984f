"""Tests for the masked cross-entropy (with label smoothing) and masked accuracy."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.training.step.losses import (
    MaskedAccuracy,
    MaskedSparseCrossEntropy,
    masked_accuracy,
)

RNG = np.random.default_rng(0)
Y_TRUE = tf.constant([[5, 2, 7, 0, 0], [3, 1, 4, 6, 0]], tf.int64)
LOGITS = tf.constant(RNG.normal(size=(2, 5, 8)), tf.float32)


def _pad_columns(y_true, logits, extra=3):
    y = tf.pad(y_true, [[0, 0], [0, extra]])
    noise = tf.constant(RNG.normal(size=(2, extra, 8)), tf.float32)
    return y, tf.concat([logits, noise], axis=1)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_pad_columns_do_not_change_the_loss(label_smoothing):
    loss = MaskedSparseCrossEntropy(label_smoothing)
    padded = loss(*_pad_columns(Y_TRUE, LOGITS))
    np.testing.assert_allclose(float(padded), float(loss(Y_TRUE, LOGITS)), rtol=1e-6)


def test_no_smoothing_equals_plain_cross_entropy_on_real_tokens():
    mask = Y_TRUE.numpy() != 0
    plain = tf.keras.losses.sparse_categorical_crossentropy(Y_TRUE, LOGITS, from_logits=True)
    expected = plain.numpy()[mask].mean()  # 7 real tokens
    np.testing.assert_allclose(float(MaskedSparseCrossEntropy()(Y_TRUE, LOGITS)), expected, 1e-6)


def test_label_smoothing_closed_form():
    # p = (0.25, 0.5, 0.25), target 1, ε = 0.3:
    # 0.7 · (-ln 0.5) + 0.3 · mean(-ln 0.25, -ln 0.5, -ln 0.25) = 1.2 ln 2.
    logits = tf.math.log(tf.constant([[[1.0, 2.0, 1.0]]]))
    loss = MaskedSparseCrossEntropy(label_smoothing=0.3)(tf.constant([[1]]), logits)
    assert float(loss) == pytest.approx(1.2 * math.log(2.0), rel=1e-6)
    keras = tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.3)
    assert float(loss) == pytest.approx(
        float(keras(tf.constant([[0.0, 1.0, 0.0]]), logits[0])), rel=1e-6
    )


def test_config_round_trip_and_bad_smoothing():
    loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
    clone = MaskedSparseCrossEntropy.from_config(loss.get_config())
    assert clone.label_smoothing == 0.1
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCrossEntropy(label_smoothing=1.0)


def test_masked_accuracy_ignores_pad():
    y_true = tf.constant([[4, 5, 0], [6, 0, 0]])
    predicted = tf.constant([[4, 9, 4], [6, 1, 1]])  # 2 of 3 real tokens right
    logits = tf.one_hot(predicted, 10)
    assert float(masked_accuracy(y_true, logits)) == pytest.approx(2 / 3)
    metric = MaskedAccuracy()
    metric.update_state(y_true, logits)
    metric.update_state(tf.constant([[7]]), tf.one_hot([[7]], 10))  # 3 of 4 over both batches
    assert float(metric.result()) == pytest.approx(3 / 4)
    metric.reset_state()
    assert float(metric.result()) == 0.0
