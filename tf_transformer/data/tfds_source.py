"""TED ``pt_to_en`` through TensorFlow Datasets, turning its dead-URL failures into one error."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError

from tf_transformer.data.errors import DatasetUnavailableError
from tf_transformer.data.ted_tarball import ARCHIVE_URL, DEAD_URL, TARBALL_NAME

TFDS_NAME = "ted_hrlr_translate/pt_to_en"

# One line: the CLI prints it as its error line.
UNAVAILABLE_HELP = (
    f"cannot get the TED data through TFDS: its download URL {DEAD_URL} is dead. Pass a copy of "
    f"{TARBALL_NAME} with --tarball PATH (Python: tarball=PATH; a mirror URL also works, e.g. "
    f"{ARCHIVE_URL}), or use --dataset sample, a directory of aligned text files or a .tsv file"
)

# TFDS retries a failed download 10 times with exponential backoff, about 3.5 minutes without
# a network, before it gives up on a URL that is dead anyway; one retry is enough to tell.
DOWNLOAD_RETRIES = 1

# What TFDS raises when the download cannot happen. OSError covers ConnectionError, urllib's
# URLError and requests' RequestException.
_DOWNLOAD_ERRORS = (tfds.download.DownloadError, NonMatchingChecksumError, OSError)


def _short_cause(error: BaseException) -> str:
    """The gist of a download failure, e.g. "ProxyError: [Errno 111] Connection refused"."""
    text = str(error)
    errno = re.search(r"\[Errno -?\d+\][^'\")\]]*", text)
    gist = errno.group(0).strip() if errno else " ".join(text.split())[:200]
    return f"{type(error).__name__}: {gist}"


@contextlib.contextmanager
def _download_retries(retries: int):
    """At most `retries` retries of a TFDS download inside the block (TFDS's own setting)."""
    from tensorflow_datasets.core.download import downloader

    saved = getattr(downloader, "MAX_RETRIES", None)
    if saved is None:  # another TFDS version: keep its behaviour
        yield
        return
    downloader.MAX_RETRIES = min(saved, retries)
    try:
        yield
    finally:
        downloader.MAX_RETRIES = saved


def load_tfds(
    split: str, *, data_dir: str | Path | None = None, download: bool = True
) -> tf.data.Dataset:
    """Loads ``ted_hrlr_translate/pt_to_en`` as ``(pt, en)`` string pairs with ``tfds.load``.

    Args:
        split: a TFDS split (``train``, ``validation``, ``test``, slices allowed).
        data_dir: the TFDS data directory (default: TFDS's own).
        download: let TFDS download and prepare the data when it is missing.

    Returns:
        A dataset of scalar ``tf.string`` ``(pt, en)`` pairs.

    Raises:
        DatasetUnavailableError: the download failed or the data is not prepared; the message
            (one line) says the URL is dead and how to proceed. TFDS's download is retried
            once, not ten times with backoff, so without a network this takes seconds.
    """
    try:
        with _download_retries(DOWNLOAD_RETRIES):
            return tfds.load(
                TFDS_NAME,
                split=split,
                data_dir=None if data_dir is None else str(data_dir),
                download=download,
                as_supervised=True,
            )
    except _DOWNLOAD_ERRORS as error:
        raise DatasetUnavailableError(f"{UNAVAILABLE_HELP} ({_short_cause(error)})") from error
    except AssertionError as error:
        # TFDS asserts when download=False and the data was never prepared.
        if "could not find data" not in str(error):
            raise
        raise DatasetUnavailableError(
            f"{UNAVAILABLE_HELP} (download=False and TFDS has no prepared copy in "
            f"{data_dir or 'its data_dir'})"
        ) from error
