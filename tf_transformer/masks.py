"""Padding and look-ahead masks as free functions.

Convention (the TensorFlow tutorial's): masks are float and **1.0 means masked** (the position may
not be attended to); 0.0 means visible. Masks are turned into an additive term for the attention
logits by `mask_to_bias`. Keras and most other libraries use the opposite convention (1 = keep).
"""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.text.special_tokens import PAD_ID

# -1e9 overflows float16 to -inf, and 0 * -inf is NaN; Keras uses -3e4 for float16.
_LARGE_NEGATIVE = {tf.float16: -3e4, tf.bfloat16: -1e9, tf.float32: -1e9, tf.float64: -1e9}


def large_negative(dtype: tf.DType) -> float:
    """The large negative number added to masked logits of `dtype`."""
    dtype = tf.as_dtype(dtype)
    if dtype not in _LARGE_NEGATIVE:
        raise InvalidValueError(f"No large negative defined for dtype {dtype.name}.")
    return _LARGE_NEGATIVE[dtype]


def mask_to_bias(mask: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """Turns a 1.0-means-masked mask into the additive logits term `mask * large_negative`."""
    dtype = tf.as_dtype(dtype)
    return tf.cast(mask, dtype) * tf.constant(large_negative(dtype), dtype)


def create_padding_mask(seq: tf.Tensor) -> tf.Tensor:
    """Masks PAD (id 0) positions.

    Args:
      seq: `(batch, len)` integer ids.

    Returns:
      float32 `(batch, 1, 1, len)`, 1.0 at PAD positions; broadcasts over heads and queries.
    """
    mask = tf.cast(tf.equal(seq, tf.cast(PAD_ID, seq.dtype)), tf.float32)
    # Two expand_dims, not `mask[:, tf.newaxis, tf.newaxis, :]`: LiteRT has no builtin for that
    # strided slice on a dynamic shape (it would need the Flex delegate).
    return tf.expand_dims(tf.expand_dims(mask, 1), 1)


def create_look_ahead_mask(size: int | tf.Tensor) -> tf.Tensor:
    """Masks future positions: float32 `(size, size)` with 1.0 strictly above the diagonal."""
    return 1.0 - tf.linalg.band_part(tf.ones((size, size), tf.float32), -1, 0)


def create_masks(src: tf.Tensor, tgt_in: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Masks for a training/teacher-forced forward pass.

    Args:
      src: `(batch, src_len)` source ids.
      tgt_in: `(batch, tgt_len)` decoder input ids.

    Returns:
      `(padding_mask, combined_mask)`: the source padding mask `(batch, 1, 1, src_len)` used by
      encoder self-attention and decoder cross-attention, and the decoder self-attention mask
      `(batch, 1, tgt_len, tgt_len)`, the maximum of the look-ahead and target padding masks.
    """
    padding_mask = create_padding_mask(src)
    look_ahead = create_look_ahead_mask(tf.shape(tgt_in)[1])
    combined_mask = tf.maximum(create_padding_mask(tgt_in), look_ahead)
    return padding_mask, combined_mask
