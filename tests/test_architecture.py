"""The package's layering: what each stage may import, read from the source (no imports run)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tf_transformer"

# Stage -> the stages it must never import. Data flows one way: text -> ids -> model ->
# decoding -> text; the serving side (inference) imports nothing from training, and the layers
# and the model know no data, text pipeline, training or decoding.
FORBIDDEN = {
    "inference": ("training", "commands", "cli", "demo", "data"),
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
    """`tf_transformer.inference.serving.export` -> `inference`; `tf_transformer.model` -> `model`."""
    return module.split(".")[1] if module.count(".") else module


def _imports(path: Path) -> set[str]:
    """Every `tf_transformer...` module a file imports, at any depth (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("tf_transformer.")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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
    assert _stage("tf_transformer.inference.serving.export") == "inference"
    assert all(
        (PACKAGE / stage).exists() or (PACKAGE / f"{stage}.py").exists() for stage in FORBIDDEN
    )


def test_the_inference_side_reads_runs_and_special_tokens_but_not_the_trainer():
    # A positive check so the rule above is not vacuous: inference does import the package.
    imported = set()
    for path in (PACKAGE / "inference").rglob("*.py"):
        imported |= _imports(path)
    assert {"tf_transformer.run_dir", "tf_transformer.text.special_tokens"} <= imported
