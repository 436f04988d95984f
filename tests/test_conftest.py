"""How `make test` groups the suite for its workers (tests/conftest.py)."""

import os
import re
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from tests.conftest import REPO_ROOT, group_scheduling, module_group

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)


def test_modules_sharing_the_cached_export_form_one_group():
    assert module_group("tests/backends/savedmodel/test_export.py") == "export_helpers"
    assert module_group("tests/commands/test_cli_export.py") == "export_helpers"
    assert module_group("tests/test_masks.py") == "tests/test_masks.py"


def test_modules_that_run_several_processes_form_one_group():
    # Two workers of a multi-worker job, two trainers on one run, a notebook's kernel, the
    # quality bench's training: never two of these side by side on the two cores.
    modules = ["tests/training/test_multiworker.py", "tests/test_faults.py"]
    modules += ["tests/test_notebooks.py", "tests/test_quality_bench.py"]
    assert {module_group(module) for module in modules} == {"processes"}
    assert module_group("tests/training/test_loop.py") == "tests/training/test_loop.py"


def run_pytest(args: list[str], cwd, timeout: int) -> subprocess.CompletedProcess:
    """A pytest of its own (no cache, no PYTEST_ variables of this run); its exit must be 0."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    return result


def test_the_costliest_group_is_collected_first(tmp_path):
    # Collected in the order given, then sorted by the costs the modules declare.
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((REPO_ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n    cost(seconds): cost\n")
    (tests / "test_cheap.py").write_text("def test_a():\n    pass\n")
    costly = "import pytest\n\npytestmark = pytest.mark.cost({})\n\ndef test_b():\n    pass\n"
    (tests / "test_costly.py").write_text(costly.format(30))
    (tests / "test_costlier.py").write_text(costly.format(60))
    modules = ["tests/test_cheap.py", "tests/test_costly.py", "tests/test_costlier.py"]
    result = run_pytest(["--collect-only", "-q", "-p", "no:xdist", *modules], tmp_path, 120)
    order = [line.split("::")[0] for line in result.stdout.splitlines() if "::" in line]
    assert order == [modules[2], modules[1], modules[0]]


def test_make_tests_workers_run_a_module_whole():
    """Under xdist itself, with `make test`'s flags: each module's tests on one worker (a
    distribution that ignores the groups spreads them over both, as loadgroup did silently)."""
    modules = ["tests/config/test_config.py", "tests/test_bench_json.py"]  # no TensorFlow import
    flags = ["-v", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
    result = run_pytest([*flags, *modules], REPO_ROOT, 300)
    workers = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+?\.py)::", result.stdout):
        workers[module].add(worker)
    assert sorted(workers) == modules and all(len(w) == 1 for w in workers.values()), workers


class FakeWorker:
    """What the scheduler calls on an xdist worker: the indices of the tests it is sent."""

    shutting_down = False

    def __init__(self, name):
        self.gateway, self.sent = SimpleNamespace(id=name), []

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def test_a_worker_gets_its_next_group_only_once_it_has_run_out():
    """A worker runs a test once it knows the next: with one test left it is idle. The next
    group waits for that, so it goes to whichever worker runs out first (xdist's own rule, two
    tests left, could hand it to a worker still busy with a long test while the other idles)."""
    three = ["tests/test_masks.py::a", "tests/test_masks.py::b", "tests/test_masks.py::c"]
    other = ["tests/config/test_config.py::a", "tests/config/test_config.py::b"]
    other.append("tests/config/test_config.py::c")
    last = ["tests/test_bench_json.py::a"]
    collection = [*three, *other, *last]
    options = {"tx": ["2*popen"], "dist": "loadfile"}
    config = SimpleNamespace(getvalue=options.get, option=SimpleNamespace(loadscopereorder=False))
    scheduler = group_scheduling()(config)
    first, second = FakeWorker("gw0"), FakeWorker("gw1")
    for worker in (first, second):
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    assert (first.sent, second.sent) == ([0, 1, 2], [3, 4, 5])
    scheduler.mark_test_complete(first, 0)  # two left, the first of them running
    assert first.sent == [0, 1, 2]
    scheduler.mark_test_complete(second, 3)
    scheduler.mark_test_complete(second, 4)  # one left: idle
    assert (first.sent, second.sent) == ([0, 1, 2], [3, 4, 5, 6])
