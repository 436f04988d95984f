"""TED ``pt_to_en`` through TensorFlow Datasets, turning its dead-URL failures into one error."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError

from tf_transformer.data.errors import DatasetUnavailableError
from tf_transformer.data.ted_tarball import ARCHIVE_URL, DEAD_URL, TARBALL_NAME, TED_SHA256

TFDS_NAME = "ted_hrlr_translate/pt_to_en"

UNAVAILABLE_HELP = (
    f"The TED data cannot be loaded through TFDS: its download URL {DEAD_URL} is dead "
    "(it no longer serves the file). To proceed, either\n"
    f"  * get a copy of {TARBALL_NAME}, e.g. from the Internet Archive:\n"
    f"      {ARCHIVE_URL}\n"
    f"    and pass it as tarball=PATH (CLI: --tarball PATH); it is checked against the sha256 "
    f"TFDS records ({TED_SHA256}); tarball= also accepts a mirror URL; or\n"
    "  * use a directory of aligned text files (train.pt/train.en, dev.*, test.*) or a TSV "
    "file, or the embedded corpus 'sample'."
)


# What TFDS raises when the download cannot happen. OSError covers ConnectionError, urllib's
# URLError and requests' RequestException.
_DOWNLOAD_ERRORS = (tfds.download.DownloadError, NonMatchingChecksumError, OSError)


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
            says the URL is dead and how to proceed.
    """
    try:
        return tfds.load(
            TFDS_NAME,
            split=split,
            data_dir=None if data_dir is None else str(data_dir),
            download=download,
            as_supervised=True,
        )
    except _DOWNLOAD_ERRORS as error:
        raise DatasetUnavailableError(f"{UNAVAILABLE_HELP}\n(TFDS said: {error})") from error
    except AssertionError as error:
        # TFDS asserts when download=False and the data was never prepared.
        if "could not find data" not in str(error):
            raise
        raise DatasetUnavailableError(f"{UNAVAILABLE_HELP}\n(TFDS said: {error})") from error
