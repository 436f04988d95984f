"""Executes every notebook end to end with tiny settings (TF_TRANSFORMER_NOTEBOOK_TINY=1).

Each plotting cell must show its figure inline: exactly one `image/png` output (no figure lost,
none shown twice), and no file is written unless a notebook asks for one.
"""

import base64
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.cost(180), pytest.mark.processes]  # cost: seconds in make test (measured)

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# A plotting cell calls a `plot_...` function (tf_transformer.plots) or pyplot (`plt.`).
PLOTTING_CALL = re.compile(r"\bplot_\w+\(|\bplt\.")
# Notebooks that import either must have plotting cells, or the pattern above has gone stale.
IMPORTS_PLOTTING = re.compile(
    r"^\s*(from tf_transformer import .*\bplots\b|from tf_transformer\.plots import|"
    r"import matplotlib|from matplotlib)",
    re.MULTILINE,
)
# The figures the issue names, so the detection cannot silently match nothing.
EXPECTED_PLOTS = {
    "01_transformer_concepts": {"plot_positional_encoding", "plot_learning_rate"},
    "02_train_translate_export": {"plot_attention_heads"},
}


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def plotting_cells(notebook):
    return [cell for cell in code_cells(notebook) if PLOTTING_CALL.search(cell.source)]


def png_outputs(cell):
    return [out["data"]["image/png"] for out in cell.outputs if "image/png" in out.get("data", {})]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [
        cell.id
        for cell in code_cells(notebook)
        if cell.get("outputs") or cell.get("execution_count") is not None
    ]
    assert not dirty, f"{path.name} is committed with outputs in cells {dirty}; clear them."


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_leaves_the_backend_alone(path):
    """`matplotlib.use(...)` in a notebook replaces Jupyter's inline backend (PITFALLS 15)."""
    source = "\n".join(cell.source for cell in code_cells(nbformat.read(path, as_version=4)))
    assert "matplotlib.use(" not in source


def test_plotting_cells_are_recognised():
    by_name = {path.stem: nbformat.read(path, as_version=4) for path in NOTEBOOKS}
    for name, functions in EXPECTED_PLOTS.items():
        calls = {
            call
            for cell in plotting_cells(by_name[name])
            for call in re.findall(r"\b(plot_\w+)\(", cell.source)
        }
        assert functions <= calls, f"{name}: plotting cells call {calls}, expected {functions}"
    for name, notebook in by_name.items():
        if any(IMPORTS_PLOTTING.search(cell.source) for cell in code_cells(notebook)):
            assert plotting_cells(notebook), f"{name} imports plotting but no cell is recognised"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_end_to_end(path, tmp_path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    # The kernel inherits this environment: tiny settings, quiet TF, and runs written to tmp.
    # No MPLBACKEND: the kernel must pick Jupyter's inline backend, as it does for a user.
    monkeypatch.setenv("TF_TRANSFORMER_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell

    for cell in plotting_cells(notebook):
        images = png_outputs(cell)
        assert len(images) == 1, (
            f"{path.name} cell {cell.id} shows {len(images)} images, expected 1 "
            f"(end the cell with the Figure; one figure per cell):\n{cell.source}"
        )
        png = base64.b64decode(images[0])
        assert png[:8] == PNG_MAGIC and len(png) > 5000, f"{path.name} cell {cell.id}"
    for cell in code_cells(notebook):
        for out in cell.outputs:
            text = out.get("data", {}).get("text/plain", "")
            assert not (text.startswith("<Figure") and "image/png" not in out["data"]), (
                f"{path.name} cell {cell.id} printed {text!r} instead of showing the figure"
            )
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.png"))
    assert not written, f"{path.name} wrote figures nobody asked for: {written}"
