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

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
# The longest groups (see `xdist_group` below), started first so none is left for the end.
LONGEST_FIRST = (
    "test_multiworker.py",
    "export_helpers",
    "test_distribute.py",
    "test_quality_bench.py",
    "test_notebooks.py",
)


def xdist_group(item) -> str:
    """The modules that share `tests/export_helpers.py`'s cached run and exports form one group;
    every other module is its own."""
    module = item.module
    if any(
        getattr(value, "__module__", None) == "tests.export_helpers"
        for value in vars(module).values()
    ):
        return "export_helpers"
    return item.path.name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup` (`make test`) a group runs whole on one worker, so module-scoped
    fixtures and the shared export are built once, not once per worker that runs a piece."""
    groups = {item: xdist_group(item) for item in items}
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(groups[item], len(rank)))


@pytest.fixture
def shared_dir() -> Path:
    """`../shared` beside the repository; skips the test when it is absent (a user's clone)."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent")
    return SHARED
