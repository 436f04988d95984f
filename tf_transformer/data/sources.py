"""One entry point for parallel pt→en data: ``load_dataset(spec, split)``."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tf_transformer.data.errors import DataFormatError
from tf_transformer.data.ted_tarball import TED_SHA256, fetch_tarball, read_ted_tarball
from tf_transformer.data.text_files import read_text_dir, read_tsv

TED_SPECS = ("ted_hrlr", "ted_hrlr_translate/pt_to_en")

_SPLIT_ALIASES = {
    "train": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
}

VALID_SPECS_HELP = (
    "valid data specs: 'ted_hrlr' (alias of 'ted_hrlr_translate/pt_to_en', through TFDS, "
    "or tarball=PATH|URL), 'sample' (the embedded corpus), a directory of aligned text files "
    "(train.pt/train.en, dev|val|validation.*, test.*, or <split>.tsv), or a .tsv file "
    "(pt<TAB>en per line)"
)


def canonical_split(split: str) -> str:
    """Maps ``train``/``dev``/``val``/``validation``/``test`` to ``train|validation|test``.

    Raises:
        ValueError: the split is none of these.
    """
    try:
        return _SPLIT_ALIASES[split.strip().lower()]
    except KeyError:
        raise ValueError(
            f"unknown split {split!r}; expected one of {sorted(_SPLIT_ALIASES)}"
        ) from None


def pairs_to_dataset(pairs: list[tuple[str, str]]) -> tf.data.Dataset:
    """Wraps Python ``(pt, en)`` pairs as a dataset of scalar ``tf.string`` pairs."""
    pt = [p for p, _ in pairs]
    en = [e for _, e in pairs]
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(pt, dtype=tf.string), tf.constant(en, dtype=tf.string))
    )


def load_dataset(
    spec: str | Path,
    split: str,
    *,
    data_dir: str | Path | None = None,
    download: bool = True,
    tarball: str | Path | None = None,
    sha256: str | None = TED_SHA256,
) -> tf.data.Dataset:
    """Loads one split of a Portuguese→English corpus as ``(pt, en)`` string pairs.

    Args:
        spec: ``"ted_hrlr"`` / ``"ted_hrlr_translate/pt_to_en"`` (TFDS, or `tarball`),
            ``"sample"``, a directory of aligned text files, or a ``.tsv`` file. A single TSV
            file is one corpus: it is returned whatever the split.
        split: ``train``, ``validation`` (also ``dev``/``val``) or ``test``.
        data_dir: TFDS data directory for the TED spec (default: TFDS's).
        download: let TFDS download the TED data when it is not prepared.
        tarball: a local copy (or a mirror URL) of ``qi18naacl-dataset.tar.gz``; the TED data is
            then read from it directly, without TFDS.
        sha256: the digest the tarball must have (default: the one TFDS records); None skips it.

    Returns:
        A ``tf.data.Dataset`` of scalar ``tf.string`` ``(pt, en)`` pairs.

    Raises:
        DatasetUnavailableError: TFDS cannot download/prepare the TED data (the URL is dead),
            or the tarball's checksum does not match.
        DataFormatError: a local corpus is malformed, or the split's files are missing.
        ValueError: unknown spec or split (the message lists the valid forms), or a tarball
            for another spec than TED.
        FileNotFoundError: the tarball does not exist.

    Example:
        >>> ds = load_dataset("sample", "dev")
        >>> pt, en = next(iter(ds))
    """
    name = canonical_split(split)
    spec_text = str(spec)
    if tarball is not None and spec_text not in TED_SPECS:
        raise ValueError(f"a tarball is for the TED data (ted_hrlr) only, not {spec_text!r}")
    if spec_text in TED_SPECS:
        if tarball is None:
            from tf_transformer.data.tfds_source import load_tfds

            return load_tfds(name, data_dir=data_dir, download=download)
        tarball_text = str(tarball)
        if tarball_text.startswith(("http://", "https://")):
            tarball = fetch_tarball(tarball_text, cache_dir=data_dir)
        return pairs_to_dataset(read_ted_tarball(tarball, name, sha256=sha256))
    if spec_text == "sample":
        from tf_transformer.data.sample import sample_pairs

        return pairs_to_dataset(sample_pairs(name))
    path = Path(spec_text).expanduser()
    if path.is_dir():
        return pairs_to_dataset(read_text_dir(path, name))
    if path.is_file():
        if path.suffix.lower() != ".tsv":
            raise DataFormatError(f"{path}: a single-file corpus must be a .tsv file")
        return pairs_to_dataset(read_tsv(path))
    raise ValueError(
        f"unknown data spec {spec_text!r}: not a known name nor an existing path; "
        f"{VALID_SPECS_HELP}"
    )
