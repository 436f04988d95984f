"""The C++ libraries' log lines (TensorFlow's, LiteRT's) held to the log level.

The CLI's TensorFlow without its C++ log lines: the log level, and the lines printed at load.

TensorFlow's C++ code logs through absl to stderr, filtered by the `TF_CPP_MIN_LOG_LEVEL`
environment variable (0: all, 1: no INFO, 2: no WARNING either, 3: FATAL only), read when it
loads. On a machine without a GPU it prints, at level 2:

    E0000 00:00:1795868797.991939   17070 cuda_platform.cc:52] failed call to cuInit: ...

and its libraries print, while they load and whatever the level (TensorFlow 2.21):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795868796.333716   17070 port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:1795868796.334059   17070 cudart_stub.cc:31] Could not find cuda drivers ...

twice (two libraries each hold a copy of absl). `set_log_level` chooses 3 unless the user set a
level; inside `tensorflow_import_held`, TensorFlow's first import holds the lines printed
meanwhile to that same level. TensorFlow stays a lazy import: only the commands that use it
load it.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator, MutableMapping

LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
# FATAL only. At 2 (ERROR) a machine without a GPU still gets "failed call to cuInit" when
# TensorFlow looks for one, and training "oneDNN supports DT_INT64 only on platforms with
# AVX-512": neither is the user's to fix, and a failure reaches the CLI as a Python exception.
QUIET_LEVEL = "3"

# absl's prefix: the severity's letter, MMDD, the time, the thread, `file:line]`. Before absl is
# initialised its clock reads `0000 00:00:<seconds since 1970>`.
_LOG_LINE = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\s\]]+:\d+\] ")
_SEVERITIES = b"IWEF"  # a line of severity _SEVERITIES[i] shows at the levels 0 to i
# LiteRT's own logger (tflite::logging_internal::MinimalLogger): `SEVERITY: message`.
_LITERT_LINE = re.compile(rb"(VERBOSE|INFO|WARNING|ERROR): ")
# A line's severity on TF_CPP_MIN_LOG_LEVEL's scale: shown at that level and below.
_LITERT_SEVERITIES = {b"VERBOSE": 0, b"INFO": 0, b"WARNING": 1, b"ERROR": 2}
# What absl prints before its first line when nobody called absl::InitializeLog().
_NOT_INITIALIZED = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
)


def set_log_level(environ: MutableMapping[str, str] | None = None) -> int:
    """Sets `TF_CPP_MIN_LOG_LEVEL` in `environ` (default: `os.environ`) to `QUIET_LEVEL` unless
    it is set (the user's value is kept, whatever it is); returns the level in effect."""
    environ = os.environ if environ is None else environ
    environ.setdefault(LOG_LEVEL_VARIABLE, QUIET_LEVEL)
    return log_level(environ)


def log_level(environ: MutableMapping[str, str] | None = None) -> int:
    """The level `TF_CPP_MIN_LOG_LEVEL` says, as TensorFlow reads it: 0 unset or not a number."""
    value = (os.environ if environ is None else environ).get(LOG_LEVEL_VARIABLE, "")
    try:
        return int(value.strip())
    except ValueError:
        return 0


def shown(line: bytes, level: int) -> bool:
    """Whether `line`, printed to stderr while TensorFlow loads, passes `level`: a C++ log line
    of a lower severity does not, nor absl's notice above such lines; anything else does."""
    if line.rstrip(b"\r\n") == _NOT_INITIALIZED:
        return level <= 0
    match = _LOG_LINE.match(line)
    if match is not None:
        return _SEVERITIES.index(match[1]) >= level
    match = _LITERT_LINE.match(line)
    return match is None or _LITERT_SEVERITIES[match[1]] >= level


@contextlib.contextmanager
def litert_lines_held() -> Iterator[None]:
    """The block's stderr held to `log_level()` (`stderr_held_to`), for the LiteRT call that
    logs "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." (a runtime's first
    `allocate_tensors`); level 0 (the variable unset, as in a user's own program) holds nothing."""
    level = log_level()
    if level <= 0:
        yield
        return
    with stderr_held_to(level):
        yield


@contextlib.contextmanager
def stderr_held_to(level: int) -> Iterator[None]:
    """Runs the block with file descriptor 2 (stderr, the C++ code's and Python's) written to a
    temporary file; then writes to stderr, in order, the lines that `shown` lets through.

    A crash inside the block (a signal, not an exception) loses what it printed:
    `TF_CPP_MIN_LOG_LEVEL=0` imports TensorFlow with stderr untouched.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                kept = b"".join(line for line in captured if shown(line, level))
                while kept:
                    kept = kept[os.write(2, kept) :]
    finally:
        os.close(saved)


class _HeldImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; at the first import of `tensorflow` it takes itself off
    `sys.meta_path` and hands on the spec the other finders give, whose loader runs the
    package's code inside `stderr_held_to(level)` (that one time)."""

    def __init__(self, level: int):
        self.level = level

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, level = spec.loader, self.level
        exec_module = loader.exec_module

        def exec_held(module) -> None:
            try:
                with stderr_held_to(level):
                    exec_module(module)
            finally:
                del loader.exec_module  # the loader's own method again

        loader.exec_module = exec_held  # this spec's loader only: a new one each find
        return spec


@contextlib.contextmanager
def tensorflow_import_held() -> Iterator[None]:
    """Inside the block, the first import of TensorFlow (wherever the command makes it, if
    it does) holds what is printed meanwhile to the log level in effect (`log_level`).

    Nothing is held when TensorFlow is imported already or the level is 0. Commands that
    never load TensorFlow (`translate` with a LiteRT export or a REST server) do not pay for
    its import, and a wrong path still fails before it loads.
    """
    level = log_level()
    if "tensorflow" in sys.modules or level <= 0:
        yield
        return
    finder = _HeldImport(level)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder in sys.meta_path:  # TensorFlow was not imported
            sys.meta_path.remove(finder)
