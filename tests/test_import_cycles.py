"""No import cycle in the package, read from the source (no imports run).

What counts: every import of a `tf_transformer` module, wherever it stands in a module:
- at module level;
- under `if TYPE_CHECKING:` (never run, yet the two modules still cannot be read, moved or
  tested one without the other, and the loop comes back the day the annotation is needed at run
  time);
- inside a function (a lazy import closes the loop at the function's first call instead of at
  import time; it defers the cycle, it does not remove it).

So no cycle is excused, lazy or annotation-only: break one by moving what both sides need into a
third module, or by passing a narrow record instead of the object that imports you (the
training policies take `PolicyInputs`, not the `Session` that makes them). A failure names each
cycle as a loop of imports, `a -> b -> a`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tf_transformer"


def module_name(path: Path, root: Path) -> str:
    """`root/pkg/a/b.py` -> `pkg.a.b`; `root/pkg/a/__init__.py` -> `pkg.a`."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str) -> set[str]:
    """Every absolute name a module imports, at any depth (module level, `if TYPE_CHECKING:`,
    functions): each `import a.b`, and `a.b.c` for each `from a.b import c`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` (a folder under `root`) it imports.

    `from a.b import c` is an edge to `a.b.c` when that is a module, else to `a.b` (the module
    that defines `c`). A module's implicit import of its parent packages is not an edge.
    """
    paths = sorted((root / package).rglob("*.py"))
    modules = {module_name(path, root) for path in paths}

    def defining_module(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for path in paths:
        names = imported_names(path.read_text(encoding="utf-8"))
        ours = (name for name in names if name.split(".")[0] == package)
        module = module_name(path, root)
        graph[module] = {defining_module(name) for name in ours} - {module, ""}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def loop_of(graph: dict[str, set[str]], component: list[str]) -> str:
    """One loop of imports through `component`'s first module, the shortest: `a -> b -> a`."""
    start, members = component[0], set(component)
    paths, queue = {start: [start]}, [start]
    for node in queue:  # breadth first: the queue grows as it is read
        for other in sorted(graph[node] & members):
            if other == start:
                return " -> ".join([*paths[node], start])
            if other not in paths:
                paths[other] = [*paths[node], other]
                queue.append(other)
    raise ValueError(f"{component} is not a cycle of {sorted(graph)}")


def cycle_report(root: Path, package: str) -> list[str]:
    """Each import cycle of `package`, as a loop of imports."""
    graph = import_graph(root, package)
    return [loop_of(graph, component) for component in import_cycles(graph)]


def test_no_import_cycles_typing_and_lazy_imports_included():
    cycles = cycle_report(PACKAGE.parent, PACKAGE.name)
    assert not cycles, "import cycles (module-level, TYPE_CHECKING and lazy imports):\n" + (
        "\n".join(cycles)
    )


def test_the_check_sees_the_package_and_names_each_kind_of_cycle(tmp_path):
    # A real edge of the package, so the check above is not vacuous.
    graph = import_graph(PACKAGE.parent, PACKAGE.name)
    session = "tf_transformer.training.session"
    assert "tf_transformer.training.policies.assembly" in graph[session]
    # A lazy cycle (the shape the REST and gRPC clients once had), an annotation-only one (the
    # shape `Session` and the policies had), and an import that closes no loop.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rest.py").write_text("def client():\n    from pkg.grpc import Client\n")
    (package / "grpc.py").write_text("from pkg.rest import client\n")
    (package / "session.py").write_text("from pkg.policies import make\n")
    typed = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.session import Session\n"
    )
    (package / "policies.py").write_text(typed)
    (package / "base.py").write_text("import pkg.rest\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.rest"] == {"pkg.grpc"} and graph["pkg.base"] == {"pkg.rest"}
    assert graph["pkg.policies"] == {"pkg.session"}
    assert cycle_report(tmp_path, "pkg") == [
        "pkg.grpc -> pkg.rest -> pkg.grpc",
        "pkg.policies -> pkg.session -> pkg.policies",
    ]
    (package / "policies.py").write_text("")
    (package / "grpc.py").write_text("")
    assert cycle_report(tmp_path, "pkg") == []


def test_the_loop_named_is_a_path_of_real_imports():
    # Three modules in one component: the loop goes through the imports as they are.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "b"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert loop_of(graph, ["a", "b", "c"]) == "a -> b -> c -> a"
