"""The decoding seam and what every search strategy shares.

The strategies (`greedy.greedy_decode`, `beam_search.beam_search`) never see the model. They
drive one function (OpenNMT-tf `dynamic_decode`, Model Garden `symbols_to_logits_fn`)::

    logits_fn(ids, step, cache) -> (logits, cache)

where `ids` is int32 `(rows,)`, the decoder input at position `step` (START at step 0), `logits`
is float32 `(rows, vocab)` for the token at position `step + 1`, and `cache` is what the
function needs from one step to the next; it must return a cache of the same structure and
shapes. `rows` is the batch for greedy decoding and `batch * beam_size` for beam search, sentence-
major (row `b * beam_size + i` is beam `i` of sentence `b`).

The cache is any nest of tensors whose first dimension is `rows`: beam search tiles it (`batch`
-> `batch * beam_size`) and reorders it by the surviving beams at every step, one
`tf.nest.map_structure` over the whole nest. What is the same for every row of a sentence (the
model's cross-attention keys and values, the source mask) is not in the cache: `logits_fn`
closes over it.

`tf_transformer.inference.decoding.cached_decode` builds the function from a `Transformer`.

Everything is built for `tf.function`: one `tf.while_loop` (`decode_loop`) that stops when every
sequence has emitted END, a fixed-size `(batch, max_new_tokens + 1)` id buffer written one column
per step, and a fixed-size model cache, so XLA (`jit_compile=True`) can compile the whole loop.

Conventions: the returned ids start with START and hold PAD (0) after END; a finished sequence
keeps feeding PAD at no cost; `lengths` count the generated tokens, END included, START
excluded; live sequences may never emit PAD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from tf_transformer.text.special_tokens import PAD_ID

LogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]


class DecodeOutput(NamedTuple):
    """What a decoder returns.

    Attributes:
      ids: int32 `(batch, len)` (or `(batch, beam, len)` for all beams): START first, PAD after
        END; `len` is `max_new_tokens + 1` untrimmed, else one more than the longest `lengths`.
      log_probs: float32 `(batch,)`, the sum of the chosen tokens' log-probabilities.
      scores: float32 `(batch,)`, the ranking score: `log_probs` for greedy decoding, the
        length-normalised `log_probs / gnmt_length_penalty(lengths, length_penalty)` for beam
        search.
      lengths: int32 `(batch,)` generated tokens, END included.
      steps: int32 scalar, decoder steps actually run (fewer than `max_new_tokens` when every
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


def decode_loop(
    body: Callable[..., tuple],
    ids: tf.Tensor,
    log_probs: tf.Tensor,
    cache: Any,
    max_new_tokens: int,
    *,
    done: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """The one decoding `tf.while_loop`: `body` from step 0 until every row is done, or for
    `max_new_tokens` steps.

    Args:
      body: `(step, ids, log_probs, lengths, finished, cache) -> the same, one step later`.
      ids: the id buffer, START in column 0 (`write_column`).
      log_probs: float32, the rows' starting log-probabilities; `lengths` start at 0 and
        `finished` at False, of the same shape.
      cache: the step-0 cache.
      max_new_tokens: the most steps.
      done: `(finished, log_probs) -> bool` per row, when a row needs no more steps (default:
        `finished`).

    Returns:
      `(steps, ids, log_probs, lengths)` after the last step.
    """

    def cond(step, ids, log_probs, lengths, finished, cache):
        rows_done = finished if done is None else done(finished, log_probs)
        return (step < max_new_tokens) & ~tf.reduce_all(rows_done)

    lengths = tf.zeros_like(log_probs, tf.int32)
    finished = tf.zeros_like(log_probs, tf.bool)
    steps, ids, log_probs, lengths, _, _ = tf.while_loop(
        cond,
        body,
        (tf.constant(0), ids, log_probs, lengths, finished, cache),
        maximum_iterations=max_new_tokens,
    )
    return steps, ids, log_probs, lengths


def next_token_log_probs(
    logits: tf.Tensor, step: tf.Tensor, min_length: int, end_id: int
) -> tf.Tensor:
    """Log-softmax of `logits` `(batch, vocab)` with PAD (and END before `min_length`) banned.

    Banned tokens get `-inf`; the others keep the model's own log-probabilities (no
    renormalisation), so scores stay comparable with teacher forcing.
    """
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    banned = banned_tokens(tf.shape(log_probs)[-1], step, min_length, end_id)
    return tf.where(banned[tf.newaxis, :], tf.constant(-float("inf")), log_probs)


def banned_tokens(vocab: tf.Tensor, step: tf.Tensor, min_length: int, end_id: int) -> tf.Tensor:
    """bool `(vocab,)`: the tokens that cannot come next (PAD, and END before `min_length`)."""
    banned = tf.one_hot(PAD_ID, vocab, on_value=True, off_value=False, dtype=tf.bool)
    if min_length > 0:
        end = tf.one_hot(end_id, vocab, on_value=True, off_value=False, dtype=tf.bool)
        banned = banned | (end & (step < min_length))
    return banned


def trim(output: DecodeOutput) -> DecodeOutput:
    """Drops the id-buffer columns after the longest sequence (dynamic shape: outside XLA)."""
    longest = tf.reduce_max(tf.concat([tf.reshape(output.lengths, [-1]), [0]], axis=0))
    return output._replace(ids=output.ids[..., : longest + 1])
