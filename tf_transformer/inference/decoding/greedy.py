"""Greedy search over the `logits_fn(ids, step, cache)` seam (see `inference.decoding.search`)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tf_transformer.inference.decoding.search import (
    DecodeOutput,
    LogitsFn,
    decode_loop,
    next_token_log_probs,
    trim,
    write_column,
)
from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID


def greedy_decode(
    logits_fn: LogitsFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    max_new_tokens: int,
    start_id: int = START_ID,
    end_id: int = END_ID,
    *,
    min_length: int = 0,
    trim_ids: bool = True,
) -> DecodeOutput:
    """Greedy decoding: the most probable next token at every step.

    Args:
      logits_fn: the seam `(ids (batch,), step, cache) -> (logits (batch, vocab), cache)`.
      initial_cache: the cache for step 0 (batch-major nest of tensors).
      batch_size: number of sequences.
      max_new_tokens: most tokens generated per sequence (END included).
      start_id, end_id: the START and END ids.
      min_length: END is banned until this many tokens have been generated (benchmarks set it
        to `max_new_tokens` to force exactly `max_new_tokens` tokens).
      trim_ids: trim the id buffer to the longest sequence (set False inside XLA, where shapes
        must be static; see `trim`).

    Returns:
      A `DecodeOutput` with `(batch, ...)` fields; `scores` equals `log_probs`.
    """
    width = max_new_tokens + 1
    ids = tf.fill([batch_size, width], 0)
    ids = write_column(ids, 0, tf.fill([batch_size], start_id))
    log_probs = tf.zeros([batch_size], tf.float32)

    def body(step, ids, log_probs, lengths, finished, cache):
        logits, cache = logits_fn(tf.gather(ids, step, axis=1), step, cache)
        step_log_probs = next_token_log_probs(logits, step, min_length, end_id)
        token = tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)  # (batch,)
        token_log_prob = tf.gather(step_log_probs, token, batch_dims=1)
        # Finished sequences emit PAD at no cost.
        token = tf.where(finished, PAD_ID, token)
        log_probs += tf.where(finished, 0.0, token_log_prob)
        lengths += tf.cast(~finished, tf.int32)
        ids = write_column(ids, step + 1, token)
        finished |= tf.equal(token, end_id)
        return step + 1, ids, log_probs, lengths, finished, cache

    steps, ids, log_probs, lengths = decode_loop(
        body, ids, log_probs, initial_cache, max_new_tokens
    )
    output = DecodeOutput(ids, log_probs, log_probs, lengths, steps)
    return trim(output) if trim_ids else output
