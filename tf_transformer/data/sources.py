"""One entry point for parallel data of any language pair: ``load_dataset(spec, split)``."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tf_transformer.data.corpus import DatasetCorpus, FileCorpus
from tf_transformer.data.errors import DataFormatError
from tf_transformer.data.mix import count_elements
from tf_transformer.data.ted_tarball import TED_SHA256, fetch_tarball, read_ted_tarball
from tf_transformer.data.text_files import checked_files, is_tsv_file, read_text_dir
from tf_transformer.errors import InvalidValueError

TED_SPECS = ("ted_hrlr", "ted_hrlr_translate/pt_to_en")
# The embedded corpus, by style: lower case with spaced punctuation, or written (capitalised).
SAMPLE_SPECS = {"sample": "lower", "sample_written": "written"}

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
    "or tarball=PATH|URL), 'sample' (the embedded corpus, lower case), 'sample_written' (the "
    "same, capitalised and punctuated), a directory of aligned text files "
    "(train.<source_lang>/train.<target_lang>, dev|val|validation.*, test.*, any other "
    "<split>.<source_lang>/<split>.<target_lang>, or <split>.tsv), "
    "or a .tsv file (source<TAB>target per line); text files may be gzip (.gz) and sharded "
    "(train.00.pt, train.01.pt, ...)"
)


def canonical_split(split: str) -> str:
    """Maps ``train``/``dev``/``val``/``validation``/``test`` to ``train|validation|test``.

    Raises:
        ValueError: the split is none of these.
    """
    try:
        return _SPLIT_ALIASES[split.strip().lower()]
    except KeyError:
        raise InvalidValueError(
            f"unknown split {split!r}; expected one of {sorted(_SPLIT_ALIASES)}"
        ) from None


def pairs_to_dataset(pairs: list[tuple[str, str]]) -> tf.data.Dataset:
    """Wraps Python ``(pt, en)`` pairs as a dataset of scalar ``tf.string`` pairs."""
    pt = [p for p, _ in pairs]
    en = [e for _, e in pairs]
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(pt, dtype=tf.string), tf.constant(en, dtype=tf.string))
    )


def load_dataset(spec: str | Path, split: str, **options) -> tf.data.Dataset:
    """Loads one split of a parallel corpus as ``(source, target)`` string pairs, in file order.

    The files are streamed, never held in memory; see `load_corpus` for `spec`, `split`, the
    `options` and the errors.

    Returns:
        A ``tf.data.Dataset`` of scalar ``tf.string`` ``(source, target)`` pairs.

    Example:
        >>> ds = load_dataset("sample", "dev")
        >>> pt, en = next(iter(ds))
    """
    return load_corpus(spec, split, **options).pairs()


def load_corpus(
    spec: str | Path,
    split: str,
    *,
    data_dir: str | Path | None = None,
    download: bool = True,
    tarball: str | Path | None = None,
    sha256: str | None = TED_SHA256,
    source_lang: str = "pt",
    target_lang: str = "en",
) -> FileCorpus | DatasetCorpus:
    """One split of a parallel corpus, to stream as ``(source, target)`` string pairs.

    Text files are read as ``<split>.<source_lang>`` and ``<split>.<target_lang>``; a TSV file
    holds ``source<TAB>target``. The built-in corpora (``sample``, TED) are Portuguese–English
    and serve either direction: ``source_lang="en", target_lang="pt"`` swaps each pair.

    Args:
        spec: ``"ted_hrlr"`` / ``"ted_hrlr_translate/pt_to_en"`` (TFDS, or `tarball`),
            ``"sample"`` (lower case: "o carro é novo ."), ``"sample_written"`` (the same pairs
            as written: "O carro é novo."), a directory of aligned text files, or a ``.tsv``
            file. A single TSV file is one corpus: it is returned whatever the split.
        split: ``train``, ``validation`` (also ``dev``/``val``) or ``test``; a directory of
            text files also takes any split it holds as files (``devtest`` for
            ``devtest.pt``/``devtest.en``).
        data_dir: TFDS data directory for the TED spec (default: TFDS's).
        download: let TFDS download the TED data when it is not prepared.
        tarball: a local copy (or a mirror URL) of ``qi18naacl-dataset.tar.gz``; the TED data is
            then read from it directly, without TFDS.
        sha256: the digest the tarball must have (default: the one TFDS records); None skips it.
        source_lang, target_lang: the language pair (codes as in the file names).

    Text files and TSV files are found and checked (line counts, UTF-8, empty lines, TSV
    columns; see `tf_transformer.data.line_check`), not read into memory: the corpus streams
    them (`tf_transformer.data.corpus`).

    Returns:
        A `FileCorpus` (text files, TSV) or `DatasetCorpus` (the built-in corpora): its
        ``pairs()`` in file order, ``shuffled(seed, ...)`` one pass in a drawn order, ``size``.

    Raises:
        DatasetUnavailableError: TFDS cannot download/prepare the TED data (the URL is dead),
            or the tarball's checksum does not match.
        DataFormatError: a local corpus is malformed, or the split's files are missing.
        ValueError: unknown spec, or a split a built-in corpus does not have (the message lists
            the valid forms), a tarball for
            another spec than TED, or a language pair a built-in corpus does not have.
        FileNotFoundError: the tarball does not exist.

    Example:
        >>> corpus = load_corpus("sample", "dev")
        >>> pt, en = next(iter(corpus.pairs()))
    """
    spec_text = str(spec)
    if tarball is not None and spec_text not in TED_SPECS:
        raise InvalidValueError(f"a tarball is for the TED data (ted_hrlr) only, not {spec_text!r}")
    if spec_text in (*SAMPLE_SPECS, *TED_SPECS):
        name = canonical_split(split)
        pairs = _builtin_pairs(spec_text, name, data_dir, download, tarball, sha256)
        pairs = _in_direction(pairs, spec_text, source_lang, target_lang)
        return DatasetCorpus(pairs, count_elements(pairs))
    path = Path(spec_text).expanduser()
    if path.is_dir():
        # A known alias reads its usual files; any other name, the files of that name.
        name = _SPLIT_ALIASES.get(split.strip().lower(), split.strip())
        return FileCorpus(read_text_dir(path, name, source_lang, target_lang))
    if path.is_file():
        if not is_tsv_file(path):
            raise DataFormatError(
                f"{path}: a single-file corpus must be a .tsv file (or a .tsv.gz)"
            )
        return FileCorpus(checked_files([path]))
    raise InvalidValueError(
        f"unknown data spec {spec_text!r}: not a known name nor an existing path; "
        f"{VALID_SPECS_HELP}"
    )


def _builtin_pairs(spec_text, name, data_dir, download, tarball, sha256) -> tf.data.Dataset:
    """A split of a built-in Portuguese->English corpus, as ``(pt, en)`` pairs."""
    if spec_text in TED_SPECS:
        if tarball is None:
            from tf_transformer.data.tfds_source import load_tfds

            return load_tfds(name, data_dir=data_dir, download=download)
        tarball_text = str(tarball)
        if tarball_text.startswith(("http://", "https://")):
            tarball = fetch_tarball(tarball_text, cache_dir=data_dir)
        return pairs_to_dataset(read_ted_tarball(tarball, name, sha256=sha256))
    from tf_transformer.data.sample import sample_pairs

    return pairs_to_dataset(sample_pairs(name, style=SAMPLE_SPECS[spec_text]))


def _in_direction(pairs: tf.data.Dataset, spec: str, source_lang: str, target_lang: str):
    """``(pt, en)`` pairs as ``(source, target)``: unchanged for pt->en, swapped for en->pt."""
    if (source_lang, target_lang) == ("pt", "en"):
        return pairs
    if (source_lang, target_lang) == ("en", "pt"):
        return pairs.map(tf.autograph.experimental.do_not_convert(lambda pt, en: (en, pt)))
    raise InvalidValueError(
        f"{spec!r} is a Portuguese-English corpus; it has no {source_lang}->{target_lang} "
        "direction (use pt->en or en->pt, or a directory of text files for other languages)"
    )
