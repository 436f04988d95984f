"""Writing a run's files so that a failed write (a full disk, a file-size limit, an I/O error)
leaves the old file or the new one, never half of one, and says so in one line.

Each writer writes under a temporary name beside the target, then renames it into place:
a rename within one directory is atomic, so readers (and TF Serving, which loads only
numbered version directories) see the target whole or not at all.

`tempfile` makes private files (0600) and folders (0700), and a rename keeps the mode, so each
writer gives what it wrote the modes `open` and `mkdir` would have given under the process's
umask (`apply_umask`) before the rename: a server running as another user can read an export.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_transformer.errors import PathExistsError, TransformerError


class WriteError(OSError, TransformerError):
    """A file of the run could not be written; what was there before is intact."""


# The causes of a failed write that a user can act on (a full disk, a size or quota limit, no
# write access, a failing disk); "free some disk space" is said only for the first three.
OUT_OF_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
WRITE_ERRNOS = (*OUT_OF_SPACE, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO)


def write_errno(error: BaseException) -> int | None:
    """The errno of a failed write: an `OSError`'s own, or the one whose text ends a TensorFlow
    file system error ("...; No space left on device"); None for any other error."""
    if isinstance(error, OSError):
        return error.errno
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.OpError):
        return None
    cause = reason(error)
    return next((n for n in WRITE_ERRNOS if cause.endswith(os.strerror(n))), None)


def is_write_error(error: BaseException) -> bool:
    """Whether `error` is a failed write: any `OSError`, and the TensorFlow errors whose cause is
    one of `WRITE_ERRNOS` (not out of memory, not a bug: InvalidArgument, Internal)."""
    return isinstance(error, OSError) or write_errno(error) is not None


def reason(error: BaseException) -> str:
    """The short cause of a write error: "No space left on device", "File too large"."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = (getattr(error, "message", None) or str(error)).strip()
    text = text.split(" [Op:")[0]  # TensorFlow's op name and its path: the cause is last
    return text.rsplit("; ", 1)[-1] or type(error).__name__


def out_of_space(error: BaseException) -> bool:
    """Whether a failed write ran out of room: ENOSPC, EFBIG or EDQUOT."""
    return write_errno(error) in OUT_OF_SPACE


@contextlib.contextmanager
def reporting_write_errors(what: str, kept: str):
    """Turns a write error inside into a `WriteError`: "cannot write WHAT: CAUSE; KEPT"."""
    try:
        yield
    except WriteError:
        raise
    except Exception as error:  # narrowed to write errors below; anything else is a bug
        if not is_write_error(error):
            raise
        raise WriteError(f"cannot write {what}: {reason(error)}; {kept}") from error


def current_umask() -> int:
    """The process's umask, read from /proc/self/status where Linux shows it (setting it to read
    it would change it for every thread for a moment)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def apply_umask(path: str | Path) -> None:
    """Gives `path`, and everything under it when it is a folder, the modes `mkdir` and `open`
    would have given under the umask: folders 0777 & ~umask, files 0666 & ~umask (0777 & ~umask
    for an executable one). Symbolic links are left alone."""
    mask = current_umask()

    def chmod(target: str) -> None:
        mode = os.lstat(target).st_mode
        if not stat.S_ISLNK(mode):
            os.chmod(target, (0o777 if mode & 0o111 or stat.S_ISDIR(mode) else 0o666) & ~mask)

    path = str(path)
    chmod(path)
    if os.path.isdir(path) and not os.path.islink(path):
        for folder, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                chmod(os.path.join(folder, name))


def write_file(path: str | Path, save: Callable[[str], None]) -> Path:
    """Writes one file atomically: `save(tmp)` writes it under a hidden temporary name beside
    `path` that ends like `path` (Keras wants `.keras`, `.weights.h5`), then a rename. When
    `save` writes nothing, `path` is left as it was.

    Raises:
      WriteError: the file could not be written; the old one is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}{''.join(path.suffixes)}")
    with reporting_write_errors(str(path), f"{path.name} is as it was"):
        try:
            save(str(tmp))
            if tmp.exists():
                apply_umask(tmp)
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path


def write_text(path: str | Path, text: str) -> None:
    """Writes `text` (UTF-8, line ends as given) to `path` atomically (the old file stays until
    the new is whole).

    Raises:
      WriteError: the file could not be written; the old one is untouched.
    """
    write_file(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8", newline=""))


def write_json(path: str | Path, data: Any) -> None:
    """Writes `data` as JSON to `path` atomically (see `write_text`).

    Raises:
      WriteError: the file could not be written; the old one is untouched.
    """
    write_text(path, json.dumps(data, indent=2, sort_keys=True))


def write_directory(path: str | Path, save: Callable[[str], None], *, replace: bool) -> Path:
    """Writes a directory atomically: `save(tmp)` into a temporary directory beside `path`, then
    a rename into place.

    Args:
      path: the directory to write.
      save: writes the contents into the directory it is given.
      replace: replace an existing `path` (renamed aside, removed once the new one is in
        place); otherwise an existing `path` is an error.

    Raises:
      WriteError: a write failed; `path` is as it was and nothing else is left.
      FileExistsError: `path` exists (or appeared while saving) and not `replace`.
    """
    path = Path(path)
    kept = f"{path} is as it was" if path.exists() else f"nothing was left at {path}"
    tmp = None
    try:
        with reporting_write_errors(str(path), kept):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
            save(str(tmp))
            apply_umask(tmp)
            if not path.exists():
                os.rename(tmp, path)
            elif not replace:
                raise PathExistsError(f"{path} appeared while writing; not overwritten.")
            else:
                _swap(tmp, path)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def _swap(new: Path, path: Path) -> None:
    """Puts directory `new` at `path`, whose old contents are removed once `new` is there."""
    aside = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.rename(path, aside)
    try:
        os.rename(new, path)
    except OSError:
        os.rename(aside, path)
        raise
    shutil.rmtree(aside, ignore_errors=True)
