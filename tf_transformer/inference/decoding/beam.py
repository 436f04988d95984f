"""Beam search with the GNMT length penalty over the `logits_fn(ids, step, cache)` seam.

See `tf_transformer.inference.decoding.search` for the seam and the conventions (START first, PAD after END,
`lengths` count END). Candidates are ranked by the length-normalised score
`log_probs / ((5 + length) / 6) ** length_penalty` (Wu et al. 2016, "Google's Neural Machine
Translation System", eq. 14). A finished beam only continues with PAD at no cost, so it keeps
its log-probability, its length and therefore its score, and competes with the live beams until
the end; decoding stops when every beam of every sentence has finished or after `max_new_tokens`
steps.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tf_transformer.config import DecodeConfig
from tf_transformer.inference.decoding.search import (
    DecodeOutput,
    LogitsFn,
    banned_tokens,
    decode_loop,
    trim,
    write_column,
)
from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID


def gnmt_length_penalty(lengths: tf.Tensor, exponent: float | tf.Tensor) -> tf.Tensor:
    """GNMT length penalty `((5 + length) / 6) ** exponent` (float32, the shape of `lengths`)."""
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, tf.cast(exponent, tf.float32))


def top_next_tokens(
    logits: tf.Tensor, k: int, step: tf.Tensor, min_length: int, end_id: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """Each row's `k` most likely next tokens: `(log_probs, ids)`, `(rows, k)` each.

    The same values as `top_k` of `search.next_token_log_probs` (banned tokens cannot be
    chosen, the others keep the model's own log-probabilities), without a log-softmax of the
    whole vocabulary: the logits are ranked, and only the `k` chosen are normalised.
    """
    logits = tf.cast(logits, tf.float32)
    banned = banned_tokens(tf.shape(logits)[-1], step, min_length, end_id)
    top_logits, top_ids = tf.math.top_k(tf.where(banned, -float("inf"), logits), k=k)
    return top_logits - tf.reduce_logsumexp(logits, axis=-1, keepdims=True), top_ids


def tile_beams(cache: Any, beam_size: int) -> Any:
    """Repeats every batch row `beam_size` times: `(batch, ...)` -> `(batch * beam, ...)`."""
    return tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), cache)


def gather_beams(cache: Any, parents: tf.Tensor) -> Any:
    """Reorders a `(batch * beam, ...)` cache by `parents` int32 `(batch, beam)` (beam indices)."""
    beam_size = tf.shape(parents)[1]
    offsets = tf.range(tf.shape(parents)[0])[:, tf.newaxis] * beam_size
    # `gather_nd` rather than `tf.gather`: the same rows, but the CPU GatherV2 kernel shards
    # large row copies over the thread pool and took ~80 µs per 256 KiB cache tensor here
    # (beam 4, 128 positions), gather_nd ~10 µs.
    rows = tf.reshape(parents + offsets, [-1, 1])  # (batch * beam, 1)
    return tf.nest.map_structure(lambda t: tf.gather_nd(t, rows), cache)


def beam_search(
    logits_fn: LogitsFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    beam_size: int,
    max_new_tokens: int,
    length_penalty: float | tf.Tensor = DecodeConfig.DEFAULT_LENGTH_PENALTY,
    start_id: int = START_ID,
    end_id: int = END_ID,
    *,
    min_length: int = 0,
    return_all_beams: bool = False,
    trim_ids: bool = True,
) -> DecodeOutput:
    """Batched beam search.

    Args:
      logits_fn: the seam `(ids (batch * beam,), step, cache) -> (logits, cache)`.
      initial_cache: the step-0 cache for `(batch, ...)`; it is tiled to `(batch * beam, ...)`
        here and reordered by the surviving beams' parents at every step.
      batch_size: number of sentences.
      beam_size: beams per sentence (the vocabulary must have more than `beam_size` tokens).
      max_new_tokens: most tokens generated per beam (END included).
      length_penalty: length-penalty exponent; 0 ranks by the raw sum of log-probabilities.
      start_id, end_id: the START and END ids.
      min_length: END is banned until this many tokens have been generated.
      return_all_beams: return every beam, `(batch, beam, ...)` sorted best first, instead of
        the best one `(batch, ...)`.
      trim_ids: trim the id buffer to the longest returned sequence (False inside XLA).

    Returns:
      A `DecodeOutput`; `scores` are the length-normalised scores the beams were ranked by.
    """
    width = max_new_tokens + 1
    cache = tile_beams(initial_cache, beam_size)
    ids = tf.fill([batch_size, beam_size, width], 0)
    ids = write_column(ids, 0, tf.fill([batch_size, beam_size], start_id))
    # Only beam 0 is live at the start, so the first step does not pick the same token k times.
    first = tf.concat([[0.0], tf.fill([beam_size - 1], -float("inf"))], axis=0)
    log_probs = tf.tile(first[tf.newaxis, :], [batch_size, 1])  # (batch, beam)

    # A finished beam has one continuation, PAD, at no cost.
    pad_only = tf.concat([[0.0], tf.fill([beam_size - 1], -float("inf"))], axis=0)
    candidates = beam_size * beam_size

    def body(step, ids, log_probs, lengths, finished, cache):
        flat_ids = tf.reshape(ids, [-1, width])  # (batch * beam, width)
        logits, cache = logits_fn(tf.gather(flat_ids, step, axis=1), step, cache)
        # A beam's length penalty is the same for all its continuations, so the best `beam`
        # candidates overall are among each beam's best `beam` tokens: rank the vocabulary per
        # beam, then `beam * beam` candidates (not `beam * vocab` scores and log-softmaxes).
        top_log_probs, top_tokens = top_next_tokens(logits, beam_size, step, min_length, end_id)
        shape = [-1, beam_size, beam_size]  # (batch, beam, candidate)
        step_log_probs = tf.where(
            finished[..., tf.newaxis], pad_only, tf.reshape(top_log_probs, shape)
        )
        tokens = tf.where(finished[..., tf.newaxis], PAD_ID, tf.reshape(top_tokens, shape))
        total = log_probs[..., tf.newaxis] + step_log_probs  # (batch, beam, candidate)
        candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (batch, beam)
        scores = total / gnmt_length_penalty(candidate_lengths, length_penalty)[..., tf.newaxis]
        _, best = tf.math.top_k(tf.reshape(scores, [-1, candidates]), k=beam_size)
        parents = best // beam_size  # (batch, beam)
        token = tf.gather(tf.reshape(tokens, [-1, candidates]), best, batch_dims=1)
        log_probs = tf.gather(tf.reshape(total, [-1, candidates]), best, batch_dims=1)
        parent_finished = tf.gather(finished, parents, batch_dims=1)
        lengths = tf.gather(lengths, parents, batch_dims=1) + tf.cast(~parent_finished, tf.int32)
        finished = parent_finished | tf.equal(token, end_id)
        ids = write_column(tf.gather(ids, parents, batch_dims=1), step + 1, token)
        cache = gather_beams(cache, parents)
        return step + 1, ids, log_probs, lengths, finished, cache

    steps, ids, log_probs, lengths = decode_loop(
        body,
        ids,
        log_probs,
        cache,
        max_new_tokens,
        # A beam stuck at -inf (fewer valid candidates than beams) can never win: count it done.
        done=lambda finished, log_probs: finished | tf.math.is_inf(log_probs),
    )
    scores = log_probs / gnmt_length_penalty(lengths, length_penalty)
    # Sort best first (top_k already ranks by score; sorting again makes it explicit and stable).
    scores, order = tf.math.top_k(scores, k=beam_size)
    ids = tf.gather(ids, order, batch_dims=1)
    log_probs = tf.gather(log_probs, order, batch_dims=1)
    lengths = tf.gather(lengths, order, batch_dims=1)
    if not return_all_beams:
        ids, log_probs, scores, lengths = ids[:, 0], log_probs[:, 0], scores[:, 0], lengths[:, 0]
    output = DecodeOutput(ids, log_probs, scores, lengths, steps)
    return trim(output) if trim_ids else output
