"""Greedy decoding over a `logits_fn(ids, step, cache)` seam, and the seam built from a Transformer.

The decoders never see the model. They drive one function (OpenNMT-tf `dynamic_decode`, Model
Garden `symbols_to_logits_fn`)::

    logits_fn(ids, step, cache) -> (logits, cache)

where `ids` is int32 `(batch,)`, the decoder input at position `step` (START at step 0), `logits`
is float32 `(batch, vocab)` for the token at position `step + 1`, and `cache` is any nest of
tensors whose first dimension is the batch (beam search tiles and reorders it by that axis).

Everything is built for `tf.function`: one `tf.while_loop` that stops when every sequence has
emitted END, a fixed-size `(batch, max_length + 1)` id buffer written one column per step, and a
fixed-size model cache, so XLA (`jit_compile=True`) can compile the whole loop.

Conventions shared with `beam_search`: the returned ids start with START and hold PAD (0) after
END; a finished sequence keeps feeding PAD at no cost; `lengths` count the generated tokens,
END included, START excluded; live sequences may never emit PAD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID

# XLA-compiled decoding pads the source to a multiple of this, bounding the compiled shapes.
SRC_LENGTH_BUCKET = 16

LogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]


class DecodeOutput(NamedTuple):
    """What a decoder returns.

    Attributes:
      ids: int32 `(batch, len)` (or `(batch, beam, len)` for all beams): START first, PAD after
        END; `len` is `max_length + 1` untrimmed, else one more than the longest `lengths`.
      log_probs: float32 `(batch,)`, the sum of the chosen tokens' log-probabilities.
      scores: float32 `(batch,)`, the ranking score: `log_probs` for greedy decoding, the
        length-normalised `log_probs / length_penalty(lengths, alpha)` for beam search.
      lengths: int32 `(batch,)` generated tokens, END included.
      steps: int32 scalar, decoder steps actually run (fewer than `max_length` when every
        sequence ended early).
    """

    ids: tf.Tensor
    log_probs: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor
    steps: tf.Tensor


def write_column(buffer: tf.Tensor, column: tf.Tensor | int, values: tf.Tensor) -> tf.Tensor:
    """Writes `values` `(...,)` into column `column` of a zero-filled `(..., width)` id buffer.

    A one-hot update keeps the buffer's shape static (cheap, and XLA-friendly); the column must
    still hold PAD (0), which is how the decoders use it.
    """
    width = tf.shape(buffer)[-1]
    one_hot = tf.one_hot(column, width, dtype=buffer.dtype)  # (width,)
    return buffer + values[..., tf.newaxis] * one_hot


def next_token_log_probs(
    logits: tf.Tensor, step: tf.Tensor, min_length: int, end_id: int
) -> tf.Tensor:
    """Log-softmax of `logits` `(batch, vocab)` with PAD (and END before `min_length`) banned.

    Banned tokens get `-inf`; the others keep the model's own log-probabilities (no
    renormalisation), so scores stay comparable with teacher forcing.
    """
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    vocab = tf.shape(log_probs)[-1]
    banned = tf.one_hot(PAD_ID, vocab, on_value=True, off_value=False, dtype=tf.bool)
    if min_length > 0:
        end = tf.one_hot(end_id, vocab, on_value=True, off_value=False, dtype=tf.bool)
        banned = banned | (end & (step < min_length))
    return tf.where(banned[tf.newaxis, :], tf.constant(-float("inf")), log_probs)


def pad_to_multiple(ids: tf.Tensor, multiple: int) -> tf.Tensor:
    """Right-pads `ids` `(batch, len)` with PAD to the next multiple of `multiple` columns."""
    length = tf.shape(ids)[1]
    extra = (multiple - length % multiple) % multiple
    return tf.pad(ids, [[0, 0], [0, extra]], constant_values=PAD_ID)


def trim(output: DecodeOutput) -> DecodeOutput:
    """Drops the id-buffer columns after the longest sequence (dynamic shape: outside XLA)."""
    longest = tf.reduce_max(tf.concat([tf.reshape(output.lengths, [-1]), [0]], axis=0))
    return output._replace(ids=output.ids[..., : longest + 1])


def greedy_decode(
    logits_fn: LogitsFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    max_length: int,
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
      max_length: most tokens generated per sequence (END included).
      start_id, end_id: the START and END ids.
      min_length: END is banned until this many tokens have been generated (benchmarks set it
        to `max_length` to force exactly `max_length` tokens).
      trim_ids: trim the id buffer to the longest sequence (set False inside XLA, where shapes
        must be static; see `trim`).

    Returns:
      A `DecodeOutput` with `(batch, ...)` fields; `scores` equals `log_probs`.
    """
    width = max_length + 1
    ids = tf.fill([batch_size, width], 0)
    ids = write_column(ids, 0, tf.fill([batch_size], start_id))
    log_probs = tf.zeros([batch_size], tf.float32)
    lengths = tf.zeros([batch_size], tf.int32)
    finished = tf.zeros([batch_size], tf.bool)

    def cond(step, ids, log_probs, lengths, finished, cache):
        return (step < max_length) & ~tf.reduce_all(finished)

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

    steps, ids, log_probs, lengths, _, _ = tf.while_loop(
        cond,
        body,
        (tf.constant(0), ids, log_probs, lengths, finished, initial_cache),
        maximum_iterations=max_length,
    )
    output = DecodeOutput(ids, log_probs, log_probs, lengths, steps)
    return trim(output) if trim_ids else output


def model_logits_fn(model, src: tf.Tensor, max_length: int) -> tuple[LogitsFn, Any]:
    """The cached seam for a `Transformer`: the encoder and cross-attention K/V run once.

    Args:
      model: a `tf_transformer.model.Transformer`.
      src: int `(batch, src_len)` source ids, PAD = 0.
      max_length: decoder positions the fixed-size self-attention cache holds.

    Returns:
      `(logits_fn, initial_cache)`; the cache is `{"layers": [...], "padding_mask": ...}`.
    """
    if max_length > model.max_length:
        raise ValueError(
            f"max_length {max_length} exceeds the model's positional table ({model.max_length})."
        )
    context, padding_mask = model.encode(src)
    cache = {"layers": model.initial_cache(context, max_length), "padding_mask": padding_mask}

    def logits_fn(ids, step, cache):
        logits, layers = model.decode_step(ids, step, cache["layers"], cache["padding_mask"])
        return logits, {"layers": layers, "padding_mask": cache["padding_mask"]}

    return logits_fn, cache


def recompute_logits_fn(model, src: tf.Tensor, max_length: int) -> tuple[LogitsFn, Any]:
    """The reference seam: re-runs `model((src, prefix))` on the whole prefix at every step.

    Slow (quadratic work, the encoder every step) but obviously right; tests compare the cached
    seam with it. The prefix lives in the cache, `{"src", "prefix" (batch, max_length)}`, so beam
    search reorders it with the beams like any other cache tensor.
    """
    cache = {"src": src, "prefix": tf.zeros([tf.shape(src)[0], max_length], tf.int32)}

    def logits_fn(ids, step, cache):
        prefix = write_column(cache["prefix"], step, ids)
        logits = model((cache["src"], prefix[:, : step + 1]), training=False)
        return logits[:, -1], {"src": cache["src"], "prefix": prefix}

    return logits_fn, cache


def make_decode_fn(
    model,
    *,
    max_length: int,
    beam_size: int = 1,
    alpha: float = 0.6,
    min_length: int = 0,
    return_all_beams: bool = False,
    jit_compile: bool = False,
    recompute: bool = False,
) -> Callable[[tf.Tensor], DecodeOutput]:
    """A `tf.function` `src (batch, src_len) int64 -> DecodeOutput` decoding with `model`.

    Args:
      model: a `Transformer`.
      max_length: most generated tokens (END included).
      beam_size: 1 for greedy decoding, else beam search with this many beams.
      alpha: GNMT length-penalty exponent (beam search only).
      min_length: END banned before this many tokens.
      return_all_beams: beam search returns `(batch, beam, ...)` fields, best first.
      jit_compile: compile encoder + decoding loop with XLA. XLA compiles once per input shape,
        so the source is padded to a multiple of `SRC_LENGTH_BUCKET` first (PAD is masked: the
        output does not change); each batch size still compiles once.
      recompute: use the reference `recompute_logits_fn` (no cache; cannot be XLA-compiled).
    """
    from tf_transformer.beam_search import beam_search

    seam = recompute_logits_fn if recompute else model_logits_fn

    def decode(src):
        logits_fn, cache = seam(model, src, max_length)
        batch = tf.shape(src)[0]
        if beam_size == 1:
            return greedy_decode(
                logits_fn, cache, batch, max_length, min_length=min_length, trim_ids=False
            )
        return beam_search(
            logits_fn,
            cache,
            batch,
            beam_size,
            max_length,
            alpha,
            min_length=min_length,
            return_all_beams=return_all_beams,
            trim_ids=False,
        )

    core = tf.function(decode, jit_compile=jit_compile and not recompute)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)])
    def decode_fn(src):
        if jit_compile and not recompute:
            src = pad_to_multiple(src, SRC_LENGTH_BUCKET)
        return trim(core(src))

    return decode_fn
