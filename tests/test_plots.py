import io
import os
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tf_transformer.plots import plot_attention_heads, plot_learning_rate, plot_positional_encoding

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 1000


@pytest.mark.parametrize("heads", [1, 2, 5])
def test_attention_plot_has_one_axes_per_head(tmp_path, heads):
    rng = np.random.default_rng(0)
    attention = rng.dirichlet(np.ones(4), size=(heads, 3))  # (heads, tgt 3, src 4)
    path = tmp_path / "attention.png"
    figure = plot_attention_heads(attention, ["a", "b", "c", "d"], ["x", "y", "z"], path)
    assert len(figure.axes) == heads
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["a", "b", "c", "d"]
    assert_png(path)
    plt.close(figure)


def test_attention_plot_rejects_mismatched_labels():
    with pytest.raises(ValueError, match="labels"):
        plot_attention_heads(np.zeros((2, 3, 4)), ["a"], ["x", "y", "z"])


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_positional_encoding_plot(tmp_path, layout):
    path = tmp_path / "pe.png"
    figure = plot_positional_encoding(50, 16, layout, path=path)
    assert len(figure.axes) == 2  # the heat map and its colour bar
    mesh = figure.axes[0].collections[0].get_array()
    assert mesh.size == 50 * 16
    assert_png(path)
    plt.close(figure)


def test_learning_rate_plot_from_callable_and_values(tmp_path):
    path = tmp_path / "lr.png"
    figure = plot_learning_rate(lambda step: min(step / 10, (10 / step) ** 0.5), 40, path)
    xs, ys = figure.axes[0].lines[0].get_data()
    assert list(xs[:2]) == [1, 2] and len(ys) == 40
    assert ys[9] == pytest.approx(1.0)
    assert_png(path)
    plt.close(figure)
    figure = plot_learning_rate([0.1, 0.2, 0.3])
    np.testing.assert_allclose(figure.axes[0].lines[0].get_data()[1], [0.1, 0.2, 0.3])
    plt.close(figure)
    with pytest.raises(ValueError, match="steps"):
        plot_learning_rate(lambda step: 1.0)


def test_importing_plots_leaves_the_backend_to_the_environment():
    # Jupyter sets MPLBACKEND to its inline backend; `matplotlib.use("Agg")` on import would
    # replace it and notebooks would print `<Figure ...>` instead of the image (PITFALLS 15).
    code = "import tf_transformer.plots, matplotlib; print(matplotlib.get_backend())"
    env = {**os.environ, "MPLBACKEND": "svg"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "svg"


def test_figures_are_returned_detached_and_written_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    figures = [
        plot_positional_encoding(8, 4),
        plot_learning_rate([0.1, 0.2]),
        plot_attention_heads(np.full((2, 3, 4), 0.25), list("abcd"), list("xyz")),
    ]
    assert list(tmp_path.iterdir()) == []  # no path: no file
    for figure in figures:
        # Not held by pyplot (Jupyter shows it once, as the cell's value; nothing accumulates) ...
        assert figure.number not in plt.get_fignums()
        # ... and it still renders.
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        assert buffer.getvalue()[:8] == PNG_MAGIC
