"""Comparing decoders whose kernels round differently (another CPU, XLA, half precision).

Two correct decoders can differ in the last bits, and where a step's top two tokens are closer
than that, their ids differ (a near-tie). So the tests compare what rounding cannot flip, against
the full model run on the decoded ids (teacher forcing, no cache):

* `assert_scored_as_the_model`: every returned hypothesis's `log_probs` is the sum the full model
  gives its tokens, within the precision's tolerance. A wrong cache (a position written in the
  wrong slot, a beam reading another beam's history, a layout's attention off) gives other
  logits from the second step on, so this fails for it, greedy or beam.
* `assert_greedy_choices_are_the_models`: at every step where the full model's top two tokens
  are further apart than the tolerance, greedy chose the top one. Steps closer than that are
  near-ties either token may win; they are counted, and the test says how many were checked.

Beam ids are not compared across kernels: a near-tie among the `beam * vocab` candidates of one
step changes which hypotheses live on, and the output does not show that step. The beam tests
with scripted log-probabilities (`test_beam.py`) check the search's choices exactly.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_transformer.text.special_tokens import END_ID, PAD_ID


def _rows(out) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """`(ids, lengths, log_probs, beams)` of a `DecodeOutput`, one row per hypothesis."""
    ids = out.ids.numpy()
    beams = ids.shape[1] if ids.ndim == 3 else 1
    return (
        ids.reshape(-1, ids.shape[-1]),
        out.lengths.numpy().reshape(-1),
        out.log_probs.numpy().reshape(-1),
        beams,
    )


def teacher_forced_log_probs(model, src, ids: np.ndarray, beams: int = 1) -> np.ndarray:
    """float32 `(rows, len - 1, vocab)`: the full model's log-softmax after each prefix of `ids`
    `(rows, len)` (row `b * beams + i` is hypothesis `i` of source `b`)."""
    src = tf.repeat(tf.cast(src, tf.int64), beams, axis=0)
    logits = model((src, tf.constant(ids[:, :-1], tf.int64)), training=False)
    return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1).numpy()


def assert_scored_as_the_model(model, src, out, atol: float) -> None:
    """Each hypothesis's `log_probs` equals the teacher-forced sum of its tokens' log-probs."""
    ids, lengths, log_probs, beams = _rows(out)
    table = teacher_forced_log_probs(model, src, ids, beams)
    chosen = np.take_along_axis(table, ids[:, 1:, np.newaxis], axis=-1)[..., 0]
    generated = np.arange(chosen.shape[1])[np.newaxis, :] < lengths[:, np.newaxis]
    expected = np.where(generated, chosen, 0.0).sum(axis=1)
    np.testing.assert_allclose(log_probs, expected, atol=atol)


def assert_greedy_choices_are_the_models(
    model, src, out, margin: float, min_length: int = 0
) -> tuple[int, int]:
    """Greedy's token at every step whose top-two margin (full model, PAD and END banned as the
    search bans them) exceeds `margin` is the model's top token. Returns `(checked, near_ties)`:
    the steps compared and the steps left out as near-ties."""
    ids, lengths, _, beams = _rows(out)
    assert beams == 1, "greedy output expected"
    table = teacher_forced_log_probs(model, src, ids)
    table[:, :, PAD_ID] = -np.inf
    table[:, :min_length, END_ID] = -np.inf
    top_two = -np.sort(-table, axis=-1)[..., :2]
    clear = (top_two[..., 0] - top_two[..., 1]) > margin
    checked = near_ties = 0
    for row, length in enumerate(lengths):
        for step in range(length):
            if not clear[row, step]:
                near_ties += 1
                continue
            checked += 1
            top, gap = table[row, step].argmax(), top_two[row, step, 0] - top_two[row, step, 1]
            assert ids[row, step + 1] == top, (
                f"row {row} step {step}: chose {ids[row, step + 1]}, the model's top token is "
                f"{top} by {gap:.3g}"
            )
    return checked, near_ties


def assert_decodes_as_the_model(
    model, src, out, *, beam_size: int, atol: float = 1e-4, min_length: int = 0
) -> None:
    """Float32 decoding: `out` scored as the full model scores its tokens (`atol` a step), and
    with `beam_size` 1 greedy's clear choices (top two more than `2 * atol` apart) the model's,
    most of them clear."""
    steps = out.ids.shape[-1] - 1
    assert_scored_as_the_model(model, src, out, atol=atol * steps)
    if beam_size == 1:
        checked, near_ties = assert_greedy_choices_are_the_models(
            model, src, out, margin=2 * atol, min_length=min_length
        )
        assert checked > near_ties, (checked, near_ties)
