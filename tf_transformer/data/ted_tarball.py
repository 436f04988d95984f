"""Reads TED ``pt_to_en`` straight from a copy of ``qi18naacl-dataset.tar.gz`` (no TFDS)."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import ssl
import tarfile
import urllib.error
import zlib
from pathlib import Path

from tf_transformer.data.errors import DataFormatError, DatasetUnavailableError
from tf_transformer.errors import MissingFileError

DEAD_URL = "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"
ARCHIVE_URL = (
    "https://web.archive.org/web/20240301220426if_/"
    "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"
)
# The digest TFDS records in ted_hrlr_translate/checksums.tsv (131,005,909 bytes).
TED_SHA256 = "216a86c3df4d4f522856fe9b920ff5be6b394d769cc88974ae8f9f5546953bbc"
TARBALL_NAME = "qi18naacl-dataset.tar.gz"
# What a download that the network broke raises, when Keras does not wrap it (`is_network_error`).
NETWORK_ERRORS = (
    ConnectionError,
    TimeoutError,
    ssl.SSLError,
    http.client.HTTPException,
    urllib.error.URLError,
)

# File suffix inside datasets/pt_to_en/ for each canonical split, as TFDS's builder reads it:
# <lang>.train, <lang>.dev (the validation split), <lang>.test.
_SPLIT_SUFFIX = {"train": "train", "validation": "dev", "test": "test"}


def sha256_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Returns the hex sha256 digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raises DatasetUnavailableError naming both digests when `path` does not hash to `expected`."""
    actual = sha256_of(path)
    if actual != expected.lower():
        raise DatasetUnavailableError(
            f"{path}: sha256 mismatch, refusing to read it: expected {expected.lower()}, "
            f"got {actual}. Use an intact copy of {TARBALL_NAME} (e.g. {ARCHIVE_URL})."
        )


def fetch_tarball(url: str, *, cache_dir: str | Path | None = None) -> Path:
    """Downloads a mirror of the TED tarball into the Keras cache (or `cache_dir`) once.

    The digest is checked by the caller with `verify_sha256`.

    Raises:
        DatasetUnavailableError: the download failed: the network (cannot download), or the
            file could not be written (permission denied, a full disk: the cause and the path).
    """
    import tensorflow as tf

    try:
        path = tf.keras.utils.get_file(
            fname=TARBALL_NAME,
            origin=url,
            cache_dir=None if cache_dir is None else str(cache_dir),
            cache_subdir="tf_transformer",
        )
    except Exception as error:  # narrowed below: a failure that is neither is a bug, re-raised
        if is_network_error(error):
            raise DatasetUnavailableError(
                f"cannot download {url}: {' '.join(str(error).split())[:300]}; download "
                f"{TARBALL_NAME} yourself and pass --tarball PATH"
            ) from error
        if not isinstance(error, OSError):
            raise
        raise DatasetUnavailableError(  # a full disk's write names no file: its folder
            f"cannot save the download of {url} to {error.filename or download_folder(cache_dir)}"
            f": {error.strerror or error}; fix that, or download {TARBALL_NAME} yourself and "
            "pass --tarball PATH"
        ) from error
    return Path(path)


def download_folder(cache_dir: str | Path | None) -> Path:
    """Where `get_file` saves the tarball: `cache_dir` (default: KERAS_HOME, or ~/.keras), or
    /tmp/.keras where that is not writable (as `get_file` falls back), then tf_transformer/."""
    base = Path(cache_dir or os.environ.get("KERAS_HOME", "~/.keras")).expanduser()
    if not os.access(base, os.W_OK):
        base = Path("/tmp/.keras")
    return base / "tf_transformer"


def is_network_error(error: BaseException) -> bool:
    """Whether a `get_file` failure is the network's: Keras turns urllib's `URLError` (an
    HTTP status, no connection) into a bare `Exception` raised while handling it; a connection
    lost mid-transfer arrives as itself."""
    if isinstance(error, NETWORK_ERRORS):
        return True
    return type(error) is Exception and isinstance(error.__context__, urllib.error.URLError)


def _member_text(archive: tarfile.TarFile, member: tarfile.TarInfo) -> list[str]:
    handle = archive.extractfile(member)
    if handle is None:
        raise DataFormatError(f"{member.name} in the tarball is not a regular file")
    try:
        text = handle.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{member.name} in the tarball is not valid UTF-8: {error}") from None
    return text.split("\n")


def read_ted_tarball(
    path: str | Path, split: str, *, sha256: str | None = TED_SHA256
) -> list[tuple[str, str]]:
    """Reads one ``pt_to_en`` split from the TED tarball, as TFDS's builder would.

    The archive holds ``datasets/pt_to_en/{pt,en}.{train,dev,test}``; like TFDS, the files are
    split on ``\\n`` and pairs with an empty side are skipped (so counts match TFDS's splits).

    Args:
        path: the local ``qi18naacl-dataset.tar.gz``.
        split: ``train``, ``validation`` or ``test``.
        sha256: the expected digest (default: the one TFDS records); None skips the check.

    Returns:
        The split's ``(pt, en)`` pairs.

    Raises:
        FileNotFoundError: there is no file at `path`.
        DatasetUnavailableError: the digest does not match.
        DataFormatError: not a tar archive, or it lacks the split's files or they are misaligned.
    """
    if not Path(path).is_file():
        raise MissingFileError(f"{path}: no such file (expected a copy of {TARBALL_NAME}).")
    if sha256 is not None:
        verify_sha256(path, sha256)
    suffix = _SPLIT_SUFFIX[split]
    wanted = {f"datasets/pt_to_en/{lang}.{suffix}": lang for lang in ("pt", "en")}
    found: dict[str, list[str]] = {}
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                for target, lang in wanted.items():
                    if name == target or name.endswith("/" + target):
                        found[lang] = _member_text(archive, member)
                if len(found) == 2:
                    break
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise DataFormatError(f"{path}: not a readable tar archive ({error})") from None
    missing = sorted(set(wanted) - {t for t, lang in wanted.items() if lang in found})
    if missing:
        raise DataFormatError(f"{path}: the tarball has no {', '.join(missing)}")
    if len(found["pt"]) != len(found["en"]):
        raise DataFormatError(
            f"{path}: misaligned {split} files: pt has {len(found['pt'])} lines, "
            f"en has {len(found['en'])} lines"
        )
    return [(pt, en) for pt, en in zip(found["pt"], found["en"]) if pt and en]
