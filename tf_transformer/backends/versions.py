"""A model base path: numbered version folders, each written atomically (TF Serving's layout,
which the SavedModel and LiteRT exports share)."""

from __future__ import annotations

from pathlib import Path

from tf_transformer.atomic_files import write_directory
from tf_transformer.errors import InvalidValueError, PathExistsError


def existing_versions(base_dir: str | Path) -> list[int]:
    """The integer version directories under `base_dir`, sorted (none if it does not exist)."""
    base_dir = Path(base_dir)
    if not base_dir.is_dir():
        return []
    return sorted(int(p.name) for p in base_dir.iterdir() if p.name.isdigit() and p.is_dir())


def find_version(path: str | Path, marker: str) -> Path | None:
    """The export at `path`: `path` itself when it holds the file `marker`, else its highest
    numbered version folder that does; None when neither."""
    path = Path(path)
    if (path / marker).is_file():
        return path
    versions = [p.parent for p in path.glob(f"*/{marker}") if p.parent.name.isdigit()]
    return max(versions, key=lambda p: int(p.name)) if versions else None


def next_version(base_dir: str | Path) -> int:
    """One more than the highest existing version, or 1."""
    versions = existing_versions(base_dir)
    return versions[-1] + 1 if versions else 1


def check_version(base_dir: str | Path, version: int | None) -> Path:
    """The directory version `version` (None: the next free one) would be written to.

    Raises:
        FileExistsError: the version exists.
        ValueError: the version is not a positive integer.
    """
    base_dir = Path(base_dir)
    if version is None:
        version = next_version(base_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidValueError(f"version must be a positive integer, got {version!r}.")
    final = base_dir / str(version)
    if final.exists():
        raise PathExistsError(
            f"{final} exists; versions are never overwritten. Omit --version to write version "
            f"{next_version(base_dir)}."
        )
    return final


def write_version(base_dir: str | Path, version: int | None, save) -> Path:
    """Writes one version directory atomically: `save(tmp_dir)` into a temporary directory
    beside it (a name TF Serving never loads), then a rename into place.

    Args:
        base_dir: the model base path (created if needed).
        version: the version number; None for `next_version`.
        save: a function writing a SavedModel into the directory it is given.

    Returns:
        The version directory.

    Raises:
        FileExistsError: when the version exists (nothing is touched).
        ValueError: for a version that is not a positive integer.
        WriteError: a write failed (a full disk); no version directory and no temporary one
            is left, and the earlier versions are untouched.
    """
    return write_directory(check_version(base_dir, version), save, replace=False)
