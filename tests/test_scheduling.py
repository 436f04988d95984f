"""How `make test` groups the suite for its workers (tests/conftest.py)."""

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import LONGEST_FIRST, REPO_ROOT, module_group


def test_modules_sharing_the_cached_export_form_one_group():
    assert module_group("tests/test_export.py") == "export_helpers"
    assert module_group("tests/test_cli_export.py") == "export_helpers"
    assert module_group("tests/test_masks.py") == "tests/test_masks.py"


def test_the_ordered_groups_exist():
    groups = {
        module_group(str(path.relative_to(REPO_ROOT)))
        for path in REPO_ROOT.glob("tests/**/test_*.py")
    }
    assert set(LONGEST_FIRST) <= groups, set(LONGEST_FIRST) - groups
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_make_tests_workers_run_a_module_whole():
    """Under xdist itself, with `make test`'s flags: each module's tests on one worker (a
    distribution that ignores the groups spreads them over both, as loadgroup did silently)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    modules = ["tests/test_masks.py", "tests/test_schedule.py"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-n", "2"]
        + ["--dist", "loadfile", "--no-loadscope-reorder", *modules],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    workers = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+?\.py)::", result.stdout):
        workers[module].add(worker)
    assert sorted(workers) == modules and all(len(w) == 1 for w in workers.values()), workers
