"""One trainer per run directory: `RunLock`, a lock file naming the process that trains it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import time
import warnings
from pathlib import Path

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.errors import TransformerError, TransformerWarning

LOCK_NAME = "train.lock"


class RunLockedError(RuntimeError, TransformerError):
    """Another process is training the same run directory."""


class RunLock:
    """Holds `RUN_DIR/train.lock` while a process trains the run; a second one is refused.

    Why `flock` and not a file created with O_EXCL plus a check that its pid still runs: the
    kernel drops an flock the moment its holder dies, SIGKILL and crashes included, so a lock
    left by a dead process can never refuse anyone, a pid reused by another program cannot
    fool the check, and two trainers starting at once cannot both see "stale" and both take
    over. The pid, host and start time written into the file only name the holder in the
    message. A holder that ends cleanly removes the file; one that finds a file whose writer
    no longer holds it says that it takes it over (that process was killed). On NFS, Linux
    maps flock onto POSIX locks that the server arbitrates between machines.

    Example:
      >>> with RunLock("runs/tiny"):
      ...     ...  # train
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.root = Path(run_dir)
        self.path = self.root / LOCK_NAME
        self._fd: int | None = None
        self._made_root = False

    def acquire(self) -> None:
        """Takes the lock, or raises `RunLockedError` at once naming the process holding it."""
        self._made_root = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        self._found = os.stat(self.root)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _describe(_read(fd))
                os.close(fd)
                raise RunLockedError(
                    f"{self.root} is being trained by {holder} (lock {self.path}); wait for it "
                    "to finish or stop it, then run again."
                ) from None
            # The holder before us may have removed the file between our open and our lock:
            # then we hold a lock on a file nobody else opens. Start again on the new file.
            if _same_file(fd, self.path):
                break
            os.close(fd)
        left = _read(fd)
        if left:
            warnings.warn(
                f"taking over the lock {self.path} of {_describe(left)}, which ended without "
                "releasing it (killed?)",
                TransformerWarning,
                stacklevel=2,
            )
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd
        self._locked_mtime = os.stat(self.root).st_mtime_ns

    def release(self) -> None:
        """Removes the lock file. A run directory the lock made and nothing else wrote is
        removed; one it found and nothing else changed gets its timestamps back, so a command
        that failed before writing (bad data) leaves the run directory as it found it."""
        if self._fd is None:
            return
        untouched = os.stat(self.root).st_mtime_ns == self._locked_mtime
        self.path.unlink(missing_ok=True)  # while still holding it: see `acquire`
        os.close(self._fd)
        self._fd = None
        if self._made_root:
            with contextlib.suppress(OSError):  # not empty: the run wrote something
                self.root.rmdir()
        elif untouched:
            os.utime(self.root, ns=(self._found.st_atime_ns, self._found.st_mtime_ns))

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def _read(fd: int) -> dict | None:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"null")
    except ValueError:  # a lock file cut short: it names nobody
        return None


def _describe(record: dict | None) -> str:
    if not record:
        return "another process"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("started", 0)))
    return f"process {record.get('pid')} on {record.get('host')} (started {started})"


def _same_file(fd: int, path: Path) -> bool:
    try:
        status = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (status.st_dev, status.st_ino) == (opened.st_dev, opened.st_ino)


def clear_run_dir(run_dir: str | os.PathLike) -> None:
    """Removes everything in `run_dir` but its lock file (`--overwrite`, under the lock)."""
    for path in Path(run_dir).iterdir():
        if path.name == LOCK_NAME:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
