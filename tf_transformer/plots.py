"""Figures: the positional-encoding table, a learning-rate schedule, attention heads.

Each function returns a matplotlib `Figure` and writes a PNG only when given `path=`. The
backend is left to the environment: Jupyter's inline backend shows a returned Figure as the
cell's result, and a process without a display gets Agg from matplotlib itself.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np

from tf_transformer.errors import InvalidValueError


def _finish(figure, path: str | os.PathLike | None):
    """Writes the PNG if asked, and hands the figure back detached from pyplot.

    Closing drops pyplot's reference, so a long-lived process does not accumulate figures and
    Jupyter shows the figure once (as the cell's result) instead of twice (result and flush).
    A closed figure still renders and saves.
    """
    if path is not None:
        figure.savefig(os.fspath(path), dpi=100, bbox_inches="tight")
    plt.close(figure)
    return figure


def plot_positional_encoding(
    length: int,
    depth: int,
    layout: str = "interleaved",
    path: str | os.PathLike | None = None,
):
    """The sinusoid table (paper section 3.5) as a heat map, positions down, depth across.

    Args:
      length: number of positions.
      depth: `d_model`.
      layout: "interleaved" (paper: sin on even, cos on odd dimensions) or "concat" (tutorial:
        all sines, then all cosines).
      path: where to write the PNG (optional).

    Returns:
      The matplotlib Figure (already closed in pyplot: leave it as a cell's last expression to
      see it in Jupyter).
    """
    from tf_transformer.layers.positional_encoding import positional_encoding

    table = np.asarray(positional_encoding(length, depth, layout=layout))  # (length, depth)
    figure, axes = plt.subplots(figsize=(8, 4))
    image = axes.pcolormesh(table, cmap="RdBu", vmin=-1, vmax=1)
    axes.set_xlabel("depth")
    axes.set_ylabel("position")
    axes.set_title(f"Positional encoding ({layout})")
    figure.colorbar(image, ax=axes)
    return _finish(figure, path)


def plot_learning_rate(
    schedule: Callable[[int], float] | Sequence[float],
    steps: int | None = None,
    path: str | os.PathLike | None = None,
):
    """Learning rate against training step.

    Args:
      schedule: any callable `step -> lr` (a Keras `LearningRateSchedule`, a lambda) evaluated
        at steps `1..steps`, or the values themselves.
      steps: number of steps to evaluate a callable at (ignored for values).
      path: where to write the PNG (optional).

    Returns:
      The matplotlib Figure (already closed in pyplot: leave it as a cell's last expression to
      see it in Jupyter).
    """
    if callable(schedule):
        if steps is None:
            raise InvalidValueError("plot_learning_rate needs `steps` for a callable schedule.")
        xs = np.arange(1, steps + 1)
        values = np.array([float(schedule(int(step))) for step in xs])
    else:
        values = np.asarray(schedule, dtype=float)
        xs = np.arange(1, len(values) + 1)
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(xs, values)
    axes.set_xlabel("training step")
    axes.set_ylabel("learning rate")
    axes.set_title("Learning-rate schedule")
    return _finish(figure, path)


def plot_attention_heads(
    attention,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: str | os.PathLike | None = None,
    *,
    columns: int = 4,
):
    """One heat map per head: target tokens down, source tokens across.

    Args:
      attention: `(heads, tgt_len, src_len)` weights (array or tensor), e.g.
        `Translator.translate(..., return_attention=True)["attention"]`.
      src_tokens: `src_len` labels.
      tgt_tokens: `tgt_len` labels.
      path: where to write the PNG (optional).
      columns: panels per row.

    Returns:
      The matplotlib Figure, with exactly one axes per head (already closed in pyplot, as
      above).
    """
    attention = np.asarray(attention)
    if attention.ndim != 3:
        raise InvalidValueError(
            f"attention must be (heads, tgt_len, src_len), got {attention.shape}."
        )
    heads, tgt_len, src_len = attention.shape
    if (len(tgt_tokens), len(src_tokens)) != (tgt_len, src_len):
        raise InvalidValueError(
            f"{len(tgt_tokens)} target and {len(src_tokens)} source labels for attention of "
            f"shape {attention.shape}."
        )
    columns = min(columns, heads)
    rows = math.ceil(heads / columns)
    figure = plt.figure(figsize=(4 * columns, 4 * rows))
    for head in range(heads):
        axes = figure.add_subplot(rows, columns, head + 1)
        axes.matshow(attention[head], vmin=0.0, vmax=1.0)
        axes.set_xticks(range(src_len))
        axes.set_xticklabels(src_tokens, rotation=90, fontsize=8)
        axes.set_yticks(range(tgt_len))
        axes.set_yticklabels(tgt_tokens, fontsize=8)
        axes.set_xlabel(f"head {head + 1}")
    figure.tight_layout()
    return _finish(figure, path)
