"""Shared test fixtures: quiet TensorFlow logs, the ../shared folder, tiny models; how
`make test` spreads the suite over its pytest-xdist workers."""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one worker per core: one TensorFlow thread each (and in the processes
    # the tests start), not a pool per core in every process competing for the same cores.
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import ast
import functools

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
# The groups (see `module_group` below) by their time in `make test` on the 2-core machine, longest
# first: a worker takes the next group when it is nearly done, so the long ones start early and
# short ones fill in at the end. Groups not listed come after, in collection order.
LONGEST_FIRST = (
    "tests/test_multiworker.py",
    "export_helpers",
    "tests/test_notebooks.py",
    "tests/test_quality_bench.py",
    "tests/test_validation.py",
    "tests/test_decoding.py",
    "tests/test_distribute.py",
    "tests/test_tokenizers.py",
    "tests/test_accumulation.py",
    "tests/test_train.py",
    "tests/test_cased_export.py",
    "tests/test_language_pair.py",
    "tests/test_shared_embeddings.py",
    "tests/test_cli_translate.py",
    "tests/test_mix.py",
    "tests/test_cli_train.py",
    "tests/test_model.py",
    "tests/test_scheduling.py",
    "tests/test_time_budget.py",
)


@functools.cache
def module_group(module_path: str) -> str:
    """A test module's group: the modules that import `tests/export_helpers.py` (its cached run
    and exports) form one; every other module is its own. `module_path` is relative to the
    repository, as in a node id."""
    tree = ast.parse((REPO_ROOT / module_path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tests.export_helpers":
            return "export_helpers"
    return module_path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The longest groups first (the order workers receive them under `make test`)."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(module_group(item.nodeid.split("::")[0]), len(rank)))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # without xdist, not called
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadfile` (`make test`), a group (see `module_group`) runs whole on one
    worker, so module-scoped fixtures and the shared export are built once, not once per worker
    that runs a piece of them. (xdist's own `loadgroup` marks do not group under pytest 9.2:
    pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_group(nodeid.split("::")[0])

    return GroupScheduling(config, log)


@pytest.fixture
def shared_dir() -> Path:
    """`../shared` beside the repository; skips the test when it is absent (a user's clone)."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent")
    return SHARED
