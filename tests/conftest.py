"""Shared test fixtures: quiet TensorFlow logs, the ../shared folder; how `make test` spreads
the suite over its pytest-xdist workers (groups of modules, the costliest first, by the cost
each module declares)."""

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
import gc
import sys

import pytest

from tf_transformer.cli import TRACING_GC_THRESHOLD

# Tracing graphs makes many Python objects, and the default collector (a pass every 700 new
# objects) walks them again and again: 6-10% of test_accumulation's CPU time here. Collections
# come 70 times less often in the test processes, as in the CLI's; nothing else changes.
gc.set_threshold(*TRACING_GC_THRESHOLD)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@functools.cache
def module_group(module_path: str) -> str:
    """A test module's group: the modules that import `tests/export_helpers.py` (its cached run
    and exports) form one; so do the modules marked `pytest.mark.processes` (each runs several
    busy processes of its own at once: on two cores, two such modules side by side starved a
    multi-worker job's heartbeats, twice in three `make test` runs on 2026-11-28); every other
    module is its own. `module_path` is relative to the repository, as in a node id."""
    tree = ast.parse((REPO_ROOT / module_path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tests.export_helpers":
            return "export_helpers"
        marked = isinstance(node, ast.Attribute) and node.attr == "processes"
        if marked and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            return "processes"
    return module_path


def declared_cost(item: pytest.Item) -> float:
    """What a test module declares it costs in `make test`, in seconds on the 2-core machine:
    `pytestmark = pytest.mark.cost(SECONDS)`, 0 when not declared (the modules of a few seconds).

    The figures are one `make test --durations=0` run (setup, call and teardown of a module's
    tests added, rounded to 10 s), measured while other work shared the machine: about 5 times
    a quiet run, the same for all, so only their order counts. A new module of more than ~20 s
    declares its own."""
    marker = item.getparent(pytest.Module).get_closest_marker("cost")
    return float(marker.args[0]) if marker else 0.0


def group_costs(items: list[pytest.Item]) -> dict[str, float]:
    """Each group's cost (see `module_group`): the declared costs of its modules, added."""
    modules: dict[str, tuple[str, float]] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        if module not in modules:
            modules[module] = (module_group(module), declared_cost(item))
    costs: dict[str, float] = {}
    for group, cost in modules.values():
        costs[group] = costs.get(group, 0.0) + cost
    return costs


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The costliest groups first (the order workers receive them under `make test`): a worker
    takes the next group when it has run out (`group_scheduling`), so the long ones start early and short ones
    fill in at the end. Equal costs keep the collection order. No file list here: each module
    declares its cost beside its tests (`declared_cost`)."""
    costs = group_costs(items)
    items.sort(key=lambda item: -costs[module_group(item.nodeid.split("::")[0])])


def group_scheduling() -> type:
    """xdist's `--dist loadfile` scheduler with a group (see `module_group`) as its unit, which
    gives a worker its next group only once the worker has run out (see `_reschedule`)."""
    from xdist.scheduler import LoadFileScheduling

    class GroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_group(nodeid.split("::")[0])

        def _reschedule(self, node) -> None:
            # xdist hands a worker its next group when 2 of its tests are left; a worker
            # runs a test once it knows the next, so with 1 left it is idle. Waiting for that
            # keeps the next group free for whichever worker runs out first: a long last test
            # (a 40 s one) no longer leaves the other worker idle at the end of the suite.
            if self.workqueue and self._pending_of(self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

    return GroupScheduling


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # without xdist, not called
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadfile` (`make test`), a group (see `module_group`) runs whole on one
    worker, so module-scoped fixtures and the shared export are built once, not once per worker
    that runs a piece of them. (xdist's own `loadgroup` marks do not group under pytest 9.2:
    pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    return group_scheduling()(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """A `make test` worker leaves as soon as it has sent its results (xdist's
    `workerfinished`, at the end of the session), without tearing its interpreter down: the
    collections of a worker's heap at exit kept both cores busy 9-11 s after the last test
    (`py-spy` in `gc_collect_main`), and nothing after this point reaches the controller."""
    if hasattr(config, "workerinput"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


@pytest.fixture
def shared_dir() -> Path:
    """`../shared` beside the repository; skips the test when it is absent (a user's clone)."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def _fit_without_autotuning():
    """`model.fit` in the test processes reads its `tf.data` inputs without autotuning.

    Keras keeps each `fit`'s epoch iterator in a reference cycle (its generator) when the fit
    stops in the middle of an epoch or raises, so the iterator is freed by a later garbage
    collection. In `make test`'s workers such collections waited 9-60 s, the worker asleep in
    the iterator's destructor, which joins the thread that autotunes the pipeline (`py-spy`
    and `gdb` stacks; a plugin that logged each collection and the iterators it freed found
    test_faults' in-process `train --fit` calls' iterators every time, 0.7-150 s old).
    Run alone, the same tests' iterators were freed in 0.05-0.9 s; the cause is not known.
    Without autotuning an iterator has no such thread. Autotuning only picks parallelism and
    buffer sizes: the batches, in order, are the same."""
    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    options = tf.data.Options()
    options.autotune.enabled = False
    fit = TensorFlowTrainer.fit

    @functools.wraps(fit)
    def fit_without_autotuning(self, x=None, *args, validation_data=None, **kwargs):
        x, validation_data = (
            data.with_options(options) if isinstance(data, tf.data.Dataset) else data
            for data in (x, validation_data)
        )
        return fit(self, x, *args, validation_data=validation_data, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TensorFlowTrainer, "fit", fit_without_autotuning)
        yield
