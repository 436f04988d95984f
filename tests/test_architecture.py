"""The package's shape, read from the source (no imports run): what each stage may import,
modules under 300 lines, folders of at most 12 modules, no import of a module or name that does
not exist (no import cycles: tests/test_import_cycles.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tf_transformer"
MAX_LINES = 300
MAX_MODULES = 12  # per folder, its __init__.py included

# Stage -> the stages it must never import. Data flows one way: text -> ids -> model ->
# decoding -> text; the serving side (inference, backends) imports nothing from training, and
# the backends build on inference, not the other way; the layers
# and the model know no data, text pipeline, training or decoding.
FORBIDDEN = {
    "inference": ("training", "commands", "cli", "demo", "data", "backends"),
    "backends": ("training", "commands", "cli", "demo", "data", "serve"),
    "serve": ("training", "commands", "cli", "demo", "data"),
    "layers": ("training", "inference", "data", "commands", "text.tokenizers"),
    "model": ("training", "inference", "data", "commands", "text.tokenizers"),
    "masks": ("training", "inference", "data", "commands", "text.tokenizers"),
    "text": ("training", "inference", "commands", "data"),
    "data": ("training", "inference", "commands"),
    "training": ("commands", "cli"),
    "run_dir": ("training", "commands"),
    "weights": ("training", "inference", "commands"),
    "checkpoint_files": ("training", "inference", "commands"),
    "atomic_files": ("training", "inference", "commands", "text", "data"),
}


def _stage(module: str) -> str:
    """`tf_transformer.backends.savedmodel.export` -> `backends`; `tf_transformer.model` ->
    `model`."""
    return module.split(".")[1] if module.count(".") else module


def _source(path: Path) -> str:
    """A module's source, or a notebook's code cells (their `%magic` lines left out)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = [cell for cell in json.loads(text)["cells"] if cell["cell_type"] == "code"]
    lines = ("".join(cell["source"]).splitlines() for cell in cells)
    return "\n".join(line for cell in lines for line in cell if not line.startswith(("%", "!")))


def _imports(path: Path, prefix: str = "tf_transformer.") -> set[str]:
    """Every `tf_transformer...` name a file imports, at any depth (lazy imports included):
    each module, and each `module.name` of a `from module import name`."""
    found = set()
    for node in ast.walk(ast.parse(_source(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith(prefix)}


def _module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _violations() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        stage = _stage(_module_name(path))
        for forbidden in FORBIDDEN.get(stage, ()):
            prefix = f"tf_transformer.{forbidden}"
            for name in sorted(_imports(path)):
                if name == prefix or name.startswith(prefix + "."):
                    bad.append(f"{path.relative_to(PACKAGE.parent)} ({stage}) imports {name}")
    return bad


def test_no_stage_imports_what_it_must_not():
    assert _violations() == []


def test_the_walk_sees_imports_and_would_catch_a_violation(tmp_path):
    # The walker reads lazy (function-level) imports too; a file that broke the rule is found.
    source = "def f():\n    from tf_transformer.training.loop import train\n"
    (tmp_path / "probe.py").write_text(source)
    assert "tf_transformer.training.loop" in _imports(tmp_path / "probe.py")
    assert _stage("tf_transformer.backends.savedmodel.export") == "backends"
    assert all(
        (PACKAGE / stage).exists() or (PACKAGE / f"{stage}.py").exists() for stage in FORBIDDEN
    )


def test_the_inference_side_reads_runs_and_special_tokens_but_not_the_trainer():
    # A positive check so the rule above is not vacuous: inference does import the package.
    imported = set()
    for path in [*(PACKAGE / "inference").rglob("*.py"), *(PACKAGE / "backends").rglob("*.py")]:
        imported |= _imports(path)
    assert {"tf_transformer.run_dir", "tf_transformer.text.special_tokens"} <= imported


def test_no_module_is_over_300_lines():
    long = {
        str(path.relative_to(REPO)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_folder_holds_more_than_12_modules():
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    crowded = {
        str(folder.relative_to(REPO)): count
        for folder in folders
        if (count := len(list(folder.glob("*.py")))) > MAX_MODULES
    }
    assert crowded == {}
    assert len(folders) > 5 and len(list((PACKAGE / "training").rglob("*.py"))) > MAX_MODULES


def _users() -> list[Path]:
    """The project's own code: the package, the tests, the benchmarks and the notebooks."""
    return [
        *PACKAGE.rglob("*.py"),
        *(REPO / "tests").rglob("*.py"),
        *(REPO / "bench").glob("*.py"),
        *(REPO / "notebooks").glob("*.ipynb"),
    ]


def _exists(module: str) -> bool:
    path = REPO.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _top_level(body: list[ast.stmt]):
    """The statements a module runs at import, those under `if`/`try`/`with` included."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _top_level(getattr(node, block, []))


def _defined(module: str) -> set[str]:
    """The names a module (or package) binds at its top level, and its submodules."""
    path = REPO.joinpath(*module.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = {child.stem for child in path.glob("*.py")} | {c.name for c in path.glob("*/")}
    for node in _top_level(ast.parse(source.read_text(encoding="utf-8")).body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _missing_imports(path: Path) -> set[str]:
    """The `tf_transformer` modules and names a file imports (lazy imports included) that do
    not exist: a module that is not there, or a name its module does not define."""
    missing = set()
    for node in ast.walk(ast.parse(_source(path))):
        if isinstance(node, ast.Import):
            names = (alias.name for alias in node.names)
            missing.update(n for n in names if n.startswith("tf_transformer.") and not _exists(n))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "tf_transformer":
                continue
            if not _exists(node.module):
                missing.add(node.module)
                continue
            defined = _defined(node.module)
            missing.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if alias.name != "*" and alias.name not in defined
            )
    return missing


def test_every_import_of_the_package_names_a_module_and_name_that_exist():
    # Renamed modules and names leave no alias behind (CHANGELOG.md lists them): the project's
    # own code, the notebooks' cells and lazy imports included, uses the current ones.
    assert "tf_transformer.backends.savedmodel.rest_client" in _imports(
        REPO / "notebooks" / "04_serving.ipynb"
    )  # the notebooks' code cells are read too
    missing = {
        f"{path.relative_to(REPO)}: {name}" for path in _users() for name in _missing_imports(path)
    }
    assert missing == set()


def test_the_import_check_would_catch_an_old_path_or_name(tmp_path):
    source = (
        "import tf_transformer.inference.export\n"
        "def f():\n"
        "    from tf_transformer.inference.serving import ServingClient, serving_client\n"
        "    from tf_transformer.backends.savedmodel.rest_client import ServingClient\n"
    )
    (tmp_path / "probe.py").write_text(source)
    assert _missing_imports(tmp_path / "probe.py") == {
        "tf_transformer.inference.export",
        "tf_transformer.inference.serving",
    }
