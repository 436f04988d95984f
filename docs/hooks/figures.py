"""MkDocs hook: draws the docs' figures at build time and adds them to the site as files.

The figures are not committed (`.gitignore` ignores `*.png`) and not written into `docs/`:
they are made from the code and data they show at every build, so they cannot go stale.

* `figures/concepts/*.png`: notebook 01's figures, from the package itself: the positional
  encoding and the learning-rate schedule through `tf_transformer.plots`, attention weights of
  `MultiHeadAttention` through `plots.plot_attention_heads`, and the masks of `masks.py` as
  images.
* `figures/benchmarks/*.png`: bench/plot_results.py over the recorded JSON in
  `docs/benchmarks/data/`; each plot names the command and date of its data.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path

from mkdocs.structure.files import File

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the package of this checkout, installed or not


def accept_example_sections() -> None:
    """Reads the singular `Example:` (keras-hub's Google style, and this package's) as an
    examples section: griffe knows only `Examples:`, and renders `Example:` as prose, where
    the `>>>` lines' brackets become broken links."""
    try:
        from griffe._internal.docstrings import google
    except ImportError:  # a griffe that moved it: the build's warnings will say so
        return
    google._section_kind.setdefault("example", google.DocstringSectionKind.examples)


accept_example_sections()
_CONCEPTS: dict[str, bytes] = {}  # drawn once per process (`mkdocs serve` rebuilds often)


def png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def concept_figures() -> dict[str, bytes]:
    """Notebook 01's figures, drawn by the package's own functions."""
    import matplotlib

    matplotlib.use("Agg")  # a build process: no display
    import matplotlib.pyplot as plt
    import numpy as np
    import tensorflow as tf

    from tf_transformer import plots
    from tf_transformer.layers import MultiHeadAttention
    from tf_transformer.masks import create_look_ahead_mask, create_masks, create_padding_mask
    from tf_transformer.training.step.schedule import WarmupSchedule

    made = {
        name: png(plots.plot_positional_encoding(length=64, depth=32, layout=name))
        for name in ("interleaved", "concat")
    }
    made = {f"positional_encoding_{name}.png": data for name, data in made.items()}

    # The masks of notebook 01: source [7, 6, PAD, PAD], target input [START, 9, 8, PAD].
    src = tf.constant([[7, 6, 0, 0]])
    tgt_in = tf.constant([[2, 9, 8, 0]])
    _, combined = create_masks(src, tgt_in)
    masks = {
        # (1, 4), the same for every query: drawn for 4 queries.
        "padding mask of [7, 6, PAD, PAD]": np.broadcast_to(create_padding_mask(src)[0, 0], (4, 4)),
        "look-ahead mask (4 positions)": create_look_ahead_mask(4).numpy(),
        "decoder mask of [START, 9, 8, PAD]": combined[0, 0].numpy(),
    }
    figure, panels = plt.subplots(1, 3, figsize=(11, 3.6))
    for axes, (title, mask) in zip(panels, masks.items()):
        axes.matshow(mask, cmap="Greys", vmin=0, vmax=1)
        for (row, col), value in np.ndenumerate(mask):
            axes.text(
                col,
                row,
                f"{value:.0f}",
                ha="center",
                va="center",
                color="white" if value else "black",
            )
        axes.set_title(title, fontsize=9)
        axes.set_xlabel("key position (attended to)")
        axes.set_ylabel("query position")
    figure.suptitle("Masks: 1.0 (dark) = masked, 0.0 = visible", fontsize=10)
    figure.tight_layout()
    made["masks.png"] = png(figure)
    plt.close(figure)

    # Self-attention of a decoder layer's MultiHeadAttention (random weights) under the
    # look-ahead mask: every head puts zero weight above the diagonal.
    tf.keras.utils.set_random_seed(0)
    tokens = ["[START]", "the", "red", "car", "is", "new"]
    attention = MultiHeadAttention(d_model=32, num_heads=4)
    x = tf.random.normal((1, len(tokens), 32))
    _, weights = attention(x, x, attention_mask=create_look_ahead_mask(len(tokens)))
    made["attention_heads.png"] = png(plots.plot_attention_heads(weights[0], tokens, tokens))

    schedule = WarmupSchedule(d_model=128, warmup_steps=4000)
    values = schedule(tf.range(1, 40001)).numpy()  # the schedule is element-wise
    made["learning_rate.png"] = png(plots.plot_learning_rate(values))
    return made


def benchmark_figures() -> dict[str, bytes]:
    """bench/plot_results.py's plots over docs/benchmarks/data/."""
    spec = importlib.util.spec_from_file_location(
        "plot_results", REPO / "bench" / "plot_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: png(figure) for name, figure in module.figures().items()}


def on_files(files, config):
    if not _CONCEPTS:
        _CONCEPTS.update(concept_figures())
    generated = {f"figures/concepts/{name}": data for name, data in _CONCEPTS.items()}
    generated.update(
        {f"figures/benchmarks/{name}": data for name, data in benchmark_figures().items()}
    )
    for uri, data in generated.items():
        files.append(File.generated(config, uri, content=data))
    return files
