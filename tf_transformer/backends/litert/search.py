"""Greedy and beam search in numpy over a one-step function: the LiteRT runtime's searches.

The policies of `inference.decoding.greedy` and `inference.decoding.beam` (START first, PAD
never chosen, the GNMT length penalty over each beam's best `beam` tokens, finished beams
carrying on with PAD at no cost, ties to the lower index), written small for numpy and tested
against the TensorFlow decoder: the ids are equal, greedy and beam
(tests/backends/litert/test_litert.py).
"""

from __future__ import annotations

import numpy as np

from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID


def top_k(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of each row's `k` largest, largest first, ties to the lower index (`tf.math.top_k`).

    Long rows (a vocabulary): `k` passes of `argmax` (its first maximum is the lower index),
    each maximum then set to -inf in a copy. A full sort of each row took most of a beam search
    step; a partition is as fast at k = 4 (measured) but picks among equal values at its
    boundary in no stated order.
    """
    if x.shape[-1] <= 4 * k:
        return np.argsort(-x, axis=-1, kind="stable")[..., :k]
    rest = x.reshape(-1, x.shape[-1]).copy()
    rows = np.arange(len(rest))
    chosen = np.empty((k, len(rest)), np.int64)  # a line a pass, written by argmax itself
    for best in chosen:
        rest.argmax(axis=-1, out=best)
        rest[rows, best] = -np.inf
    return chosen.T.reshape(*x.shape[:-1], k)


def gnmt(lengths: np.ndarray, exponent: float) -> np.ndarray:
    """`beam_search.gnmt_length_penalty` in numpy."""
    return ((5.0 + lengths.astype(np.float32)) / np.float32(6.0)) ** np.float32(exponent)


def greedy(run_step, batch: int, steps: int, min_length: int = 0) -> np.ndarray:
    """`greedy.greedy_decode`'s choices: the most likely token but PAD (id 0), until END.

    Args:
      run_step: `(ids (rows,), step, parents) -> logits (rows, vocab)` (a copy it may change);
        `parents` is always None here.
      batch: rows; steps: most tokens; min_length: END banned before this many.

    Returns:
      int32 `(batch, len)` ids, START first, PAD after END.
    """
    ids = np.zeros((batch, steps + 1), np.int32)
    ids[:, 0] = START_ID
    finished = np.zeros(batch, bool)
    for step in range(steps):
        logits = run_step(ids[:, step], step)
        if step < min_length:
            logits[:, END_ID] = -np.inf
        token = np.argmax(logits[:, PAD_ID + 1 :], axis=-1).astype(np.int32) + PAD_ID + 1
        ids[:, step + 1] = np.where(finished, PAD_ID, token)
        finished |= ids[:, step + 1] == END_ID
        if finished.all():
            return ids[:, : step + 2]
    return ids


def beam_search(
    run_step,
    batch: int,
    beam: int,
    steps: int,
    penalty: float,
    min_length: int = 0,
    *,
    all_beams: bool = False,
) -> np.ndarray:
    """`beam_search.beam_search` in numpy (its docstring has the policy): the best hypothesis,
    or with `all_beams` every beam, best first: `(batch, beam, len)`.

    Args:
      run_step: `(ids (rows,), step, parents) -> logits (rows, vocab)`, a copy it may change;
        `parents` int `(rows,)` (None at first): row `r` continues row `parents[r]`'s
        hypothesis, so the caller reorders its caches first.
      batch: sentences (`rows = batch * beam`, sentence-major); beam: beams per sentence.
      steps: most tokens; penalty: the GNMT length-penalty exponent; min_length: END banned
        before this many tokens.

    Returns:
      int32 `(batch, len)` ids, START first, PAD after END.
    """
    # One row per hypothesis, sentence-major, as `run_step` sees them.
    rows = batch * beam
    ids = np.zeros((rows, steps + 1), np.int32)
    ids[:, 0] = START_ID
    log_probs = np.full(rows, -np.inf, np.float32)
    log_probs[::beam] = 0.0  # only beam 0 is live at the start
    lengths = np.zeros(rows, np.int32)
    finished = np.zeros(rows, bool)
    pad_only = np.full(beam, -np.inf, np.float32)
    pad_only[0] = 0.0
    penalties = gnmt(np.arange(steps + 1), penalty)  # by length
    row_index = np.arange(rows)[:, None]
    # Sentence s's beam * beam candidates are numbered from s * beam * beam: candidate c
    # continues row c // beam with that row's (c % beam)-th best token.
    first_candidate = (np.arange(batch) * beam * beam)[:, None]
    parents = None
    for step in range(steps):
        logits = run_step(ids[:, step], step, parents)  # a copy
        # Log-probabilities of the whole vocabulary (PAD included), as `top_next_tokens`.
        peak = logits.max(axis=-1, keepdims=True)
        exps = logits - peak
        np.exp(exps, out=exps)
        log_total = np.log(exps.sum(axis=-1, keepdims=True)) + peak
        logits[:, PAD_ID] = -np.inf  # banned
        if step < min_length:
            logits[:, END_ID] = -np.inf
        top = top_k(logits, beam)  # (rows, beam): each row's best tokens
        step_log_probs = logits[row_index, top] - log_total
        if finished.any():  # they carry on with PAD at no cost
            step_log_probs[finished] = pad_only
            top[finished] = PAD_ID
        total = log_probs[:, None] + step_log_probs  # (rows, beam)
        lengths = lengths + ~finished  # its candidates' lengths
        scores = total / penalties[lengths][:, None]
        best = (top_k(scores.reshape(batch, -1), beam) + first_candidate).reshape(-1)
        parents = best // beam
        token = top.reshape(-1)[best]
        log_probs = total.reshape(-1)[best]
        lengths = lengths[parents]
        finished = finished[parents] | (token == END_ID)
        ids = ids[parents]
        ids[:, step + 1] = token
        if (finished | np.isinf(log_probs)).all():
            break
    order = top_k((log_probs / penalties[lengths]).reshape(batch, beam), beam if all_beams else 1)
    order += np.arange(batch)[:, None] * beam
    kept = ids[order, : lengths[order].max() + 1]  # (batch, beams kept, len)
    return kept if all_beams else kept[:, 0]
