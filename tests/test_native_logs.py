"""The CLI's TensorFlow log level, and the lines TensorFlow's libraries print as they load.

A real CLI process, with and without the user's level, is in commands/test_cli_translate.py.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tf_transformer.native_logs import (
    QUIET_LEVEL,
    log_level,
    set_log_level,
    shown,
    stderr_held_to,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# What TensorFlow 2.21 printed here, as a CPU-only machine's CLI started (two copies of absl).
NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
INFO = b"I0000 00:00:1795868796.334059   17070 cudart_stub.cc:31] Could not find cuda drivers\n"
WARNING = b"W0000 00:00:1795868796.334059   17070 py_utils.cc:38] TF-TRT Warning: no TensorRT\n"
ERROR = b"E0000 00:00:1795868797.991939   17070 cuda_platform.cc:52] failed call to cuInit\n"
FATAL = b"F1128 12:35:30.891928      12 cpu_feature_guard.cc:9] AVX is not available\n"
OTHER = b"Traceback (most recent call last):\n"


def test_the_cli_level_is_fatal_only_unless_the_user_set_one():
    environ = {}
    assert set_log_level(environ) == 3 and environ == {"TF_CPP_MIN_LOG_LEVEL": QUIET_LEVEL}
    for value, level in [("0", 0), ("1", 1), (" 2 ", 2), ("", 0), ("verbose", 0)]:
        environ = {"TF_CPP_MIN_LOG_LEVEL": value}
        assert set_log_level(environ) == level and environ == {"TF_CPP_MIN_LOG_LEVEL": value}
    assert log_level({}) == 0  # unset: TensorFlow logs everything


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (0, [NOTICE, INFO, WARNING, ERROR, FATAL, OTHER]),
        (1, [WARNING, ERROR, FATAL, OTHER]),
        (2, [ERROR, FATAL, OTHER]),
        (3, [FATAL, OTHER]),
    ],
)
def test_lines_printed_while_loading_are_held_to_the_level(level, expected):
    lines = [NOTICE, INFO, WARNING, ERROR, FATAL, OTHER]
    assert [line for line in lines if shown(line, level)] == expected


def child(script: str, level: str, *paths: Path) -> bytes:
    """The stderr of `python -c script` with `TF_CPP_MIN_LOG_LEVEL=level`: file descriptor 2
    itself, as the C++ code writes it, which pytest's capture of this process would hide."""
    path = os.pathsep.join(map(str, [*paths, REPO_ROOT]))
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        timeout=60,
        check=True,
        env=dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL=level),
    )
    return done.stderr


def test_held_stderr_writes_back_what_passes_in_order():
    script = (
        "import os, sys\n"
        "from tf_transformer.native_logs import stderr_held_to\n"
        "with stderr_held_to(3):\n"
        f"    os.write(2, {NOTICE + INFO!r})\n"
        "    print('a Python line', file=sys.stderr)\n"
        f"    os.write(2, {ERROR + FATAL!r})\n"
        "print('after', file=sys.stderr)\n"
    )
    assert child(script, "3") == b"a Python line\n" + FATAL + b"after\n"


@pytest.mark.parametrize("level", ["3", "1", "0"])
def test_only_the_first_import_of_tensorflow_is_held(tmp_path, level):
    # A stand-in `tensorflow` whose import prints what TensorFlow's libraries print as they load.
    (tmp_path / "tensorflow").mkdir()
    loading = NOTICE + INFO + ERROR + FATAL
    (tmp_path / "tensorflow" / "__init__.py").write_text(f"import os\nos.write(2, {loading!r})\n")
    script = (
        "import os, sys\n"
        "from tf_transformer.native_logs import tensorflow_import_held\n"
        "with tensorflow_import_held():\n"
        "    import json\n"
        "    import tensorflow\n"
        f"    os.write(2, {ERROR!r})\n"  # after the import: TensorFlow's own level applies
        "    import tensorflow\n"
        "assert 'exec_module' not in vars(tensorflow.__loader__)\n"  # the loader as it was
        "assert not [f for f in sys.meta_path if type(f).__name__ == '_HeldImport']\n"
        "with tensorflow_import_held():\n"  # imported already: nothing is held
        "    pass\n"
    )
    kept = {"3": [FATAL], "1": [ERROR, FATAL], "0": [NOTICE, INFO, ERROR, FATAL]}[level]
    assert child(script, level, tmp_path) == b"".join(kept) + ERROR


def test_a_command_that_never_imports_tensorflow_leaves_no_finder_behind():
    import tf_transformer.native_logs as logs

    before = list(sys.meta_path)
    with logs.tensorflow_import_held():
        pass  # tensorflow is imported in this process already: no finder at all
    assert sys.meta_path == before
    script = (
        "import sys\n"
        "from tf_transformer.native_logs import tensorflow_import_held\n"
        "before = list(sys.meta_path)\n"
        "with tensorflow_import_held():\n"
        "    assert type(sys.meta_path[0]).__name__ == '_HeldImport'\n"
        "assert sys.meta_path == before and 'tensorflow' not in sys.modules\n"
    )
    assert child(script, "3") == b""


def test_held_stderr_is_given_back_when_the_block_raises():
    before = os.fstat(2)
    with pytest.raises(ImportError), stderr_held_to(3):
        raise ImportError("no tensorflow")
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


def test_litert_lines_follow_the_level():
    created = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
    assert shown(created, 0) and not shown(created, 1)
    assert shown(b"WARNING: op shape mismatch\n", 1) and not shown(b"WARNING: x\n", 2)
    assert shown(b"ERROR: failed to allocate\n", 2) and not shown(b"ERROR: x\n", 3)
    assert shown(b"INFORMATION: not a log line\n", 3)
