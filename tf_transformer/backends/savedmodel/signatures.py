"""What the export's signatures share: their input specs, the XLA export's batch padding, the
empty batch's answer, and the `tf.Variable`s the SavedModel tracks."""

from __future__ import annotations

import tensorflow as tf

SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
SENTENCE = tf.TensorSpec([], tf.string, name="sentence")


def tf_variable(variable) -> tf.Variable:
    """The `tf.Variable` behind a Keras 3 variable (or `variable` itself)."""
    inner = getattr(variable, "value", variable)
    return inner if isinstance(inner, tf.Variable) else variable


def pad_batch(sentences: tf.Tensor) -> tf.Tensor:
    """`sentences` `(batch,)` padded to the next power of two rows (`batch` > 0).

    The extra rows repeat the first sentence: they decode exactly as long as it does, so they
    neither lengthen the decoding loop nor widen the ids of the real rows.
    """
    batch = tf.size(sentences)
    powers = tf.constant([2**i for i in range(31)], tf.int32)
    bucket = tf.gather(powers, tf.reduce_sum(tf.cast(powers < batch, tf.int32)))
    rows = tf.concat([tf.range(batch), tf.zeros([bucket - batch], tf.int32)], axis=0)
    return tf.gather(sentences, rows)


def batch_outputs(translate, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
    """The serving outputs of `translate` (a `Translator.graph_fn`); an empty batch is answered
    without decoding (the encoder cannot run on a `(0, 0)` source)."""

    def outputs():
        result = translate(sentences)
        return {
            "translations": result["text"],
            "scores": tf.cast(result["scores"], tf.float32),
            "tokens": tf.cast(result["ids"], tf.int64),
        }

    def nothing():
        return {
            "translations": tf.zeros([0], tf.string),
            "scores": tf.zeros([0], tf.float32),
            "tokens": tf.zeros([0, 0], tf.int64),
        }

    return tf.cond(tf.size(sentences) > 0, outputs, nothing)
