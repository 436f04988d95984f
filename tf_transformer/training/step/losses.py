"""Masked token-level cross-entropy (with label smoothing) and accuracy; PAD (id 0) is ignored."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.text.special_tokens import PAD_ID


def token_mask(y_true: tf.Tensor, dtype=tf.float32) -> tf.Tensor:
    """1.0 where `y_true` is a real token, 0.0 at PAD (the keep convention of losses)."""
    return tf.cast(tf.not_equal(y_true, PAD_ID), dtype)


def token_losses(y_true: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0) -> tf.Tensor:
    """Per-token cross-entropy from logits, PAD positions included (mask them yourself).

    With label smoothing ε the target distribution is `(1 - ε) · one_hot + ε / V` (paper §5.4;
    the same convention as `tf.keras.losses.CategoricalCrossentropy(label_smoothing=ε)`), so
    `loss = (1 - ε) · nll(y) + ε · mean_k(-log p_k)`.

    Args:
      y_true: int `(batch, length)` target ids.
      logits: float `(batch, length, vocab)`.
      label_smoothing: ε in [0, 1).

    Returns:
      float32 `(batch, length)`.
    """
    logits = tf.cast(logits, tf.float32)
    y_true = tf.cast(y_true, tf.int32)
    if not label_smoothing:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_true, logits=logits)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    nll = -tf.gather(log_probs, y_true, axis=-1, batch_dims=2)
    smooth = -tf.reduce_mean(log_probs, axis=-1)
    return (1.0 - label_smoothing) * nll + label_smoothing * smooth


def masked_loss_sum(
    y_true: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0
) -> tuple[tf.Tensor, tf.Tensor]:
    """`(sum of token losses over real tokens, number of real tokens)`, both float32 scalars.

    The custom training loop divides the sum by the *global* number of real tokens, so the
    loss is right whatever the number of replicas.
    """
    mask = token_mask(y_true)
    losses = token_losses(y_true, logits, label_smoothing)
    return tf.reduce_sum(losses * mask), tf.reduce_sum(mask)


def masked_correct_sum(y_true: tf.Tensor, logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`(number of real tokens predicted right by argmax, number of real tokens)`, float32."""
    mask = token_mask(y_true)
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int64)
    correct = tf.cast(tf.equal(predictions, tf.cast(y_true, tf.int64)), tf.float32) * mask
    return tf.reduce_sum(correct), tf.reduce_sum(mask)


def masked_accuracy(y_true: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Token accuracy over real (non-PAD) targets, a float32 scalar (0 for an all-PAD batch)."""
    correct, total = masked_correct_sum(y_true, logits)
    return tf.math.divide_no_nan(correct, total)


def _replicas_in_sync() -> int:
    context = tf.distribute.get_replica_context()
    return context.num_replicas_in_sync if context is not None else 1


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class MaskedSparseCrossEntropy(tf.keras.losses.Loss):
    """Sparse cross-entropy from logits, averaged over real (non-PAD) target tokens.

    The value is `sum of token losses over real tokens / number of real tokens` — the same
    number the custom training loop reports — whatever Keras' usual reduction would do.
    `sample_weight`, when given, multiplies the token mask (shape `(batch,)` or
    `(batch, length)`). Inside a `tf.distribute` replica the value is divided by the number of
    replicas, as Keras' own losses do, since `model.fit` sums gradients across replicas.

    Args:
      label_smoothing: ε (paper: 0.1).
      name: the loss name.

    Call arguments:
      y_true: int `(batch, length)` target ids, PAD = 0.
      y_pred: float `(batch, length, vocab)` logits.

    Returns:
      A float32 scalar.

    Example:
      >>> loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
      >>> model.compile(optimizer="adam", loss=loss, metrics=[MaskedAccuracy()])
    """

    def __init__(self, label_smoothing: float = 0.0, name: str = "masked_sparse_cross_entropy"):
        super().__init__(name=name)
        if not 0.0 <= label_smoothing < 1.0:
            raise InvalidValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}.")
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        """Per-token losses `(batch, length)`, PAD included (reduced in `__call__`)."""
        return token_losses(y_true, y_pred, self.label_smoothing)

    def __call__(self, y_true, y_pred, sample_weight=None):
        with tf.name_scope(self.name):
            mask = token_mask(y_true)
            if sample_weight is not None:
                weight = tf.cast(sample_weight, tf.float32)
                if weight.shape.rank == 1:
                    weight = weight[:, tf.newaxis]
                mask = mask * weight
            losses = self.call(y_true, y_pred)
            loss = tf.math.divide_no_nan(tf.reduce_sum(losses * mask), tf.reduce_sum(mask))
            return loss / _replicas_in_sync()

    def get_config(self) -> dict:
        return {"label_smoothing": self.label_smoothing, "name": self.name}


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class MaskedAccuracy(tf.keras.metrics.Metric):
    """Token accuracy over real (non-PAD) targets, accumulated over batches.

    Args:
      name: the metric name (shown by `model.fit` as `masked_accuracy`).

    Call arguments:
      y_true: int `(batch, length)` target ids, PAD = 0.
      y_pred: float `(batch, length, vocab)` logits.
    """

    def __init__(self, name: str = "masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        correct, total = masked_correct_sum(y_true, y_pred)
        self.correct.assign_add(tf.cast(correct, self.correct.dtype))
        self.total.assign_add(tf.cast(total, self.total.dtype))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self) -> dict:
        return {"name": self.name}
