"""Parallel text corpora on disk: aligned ``<split>.<src>``/``<split>.<tgt>`` files or TSV files."""

from __future__ import annotations

from pathlib import Path

from tf_transformer.data.errors import DataFormatError

# Accepted file stems for each canonical split, in the order they are looked for.
SPLIT_STEMS = {
    "train": ("train",),
    "validation": ("dev", "val", "validation"),
    "test": ("test",),
}


def read_lines(path: str | Path, *, allow_empty: bool = False) -> list[str]:
    """Reads a UTF-8 file as a list of lines, checking every line.

    Args:
        path: the file to read.
        allow_empty: keep empty (or whitespace-only) lines instead of refusing them.

    Returns:
        The lines without their line endings (``\\n`` or ``\\r\\n``); a final newline does not
        make an extra empty line.

    Raises:
        DataFormatError: a line is not valid UTF-8, or is empty when `allow_empty` is False.
            The message names the file and the 1-based line number.
    """
    path = Path(path)
    raw = path.read_bytes()
    chunks = raw.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    lines = []
    for number, chunk in enumerate(chunks, start=1):
        try:
            line = chunk.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as error:
            raise DataFormatError(
                f"{path}: line {number} is not valid UTF-8 ({error.reason} at byte {error.start})"
            ) from None
        if not allow_empty and not line.strip():
            raise DataFormatError(f"{path}: line {number} is empty")
        lines.append(line)
    return lines


def read_aligned_files(source_path: str | Path, target_path: str | Path) -> list[tuple[str, str]]:
    """Reads two line-aligned files into ``(source, target)`` pairs.

    Raises:
        DataFormatError: bad UTF-8 or an empty line (file and line number), or the two files
            have different line counts (both counts).
    """
    source_lines = read_lines(source_path)
    target_lines = read_lines(target_path)
    if len(source_lines) != len(target_lines):
        raise DataFormatError(
            f"misaligned files: {source_path} has {len(source_lines)} lines but {target_path} "
            f"has {len(target_lines)} lines"
        )
    return list(zip(source_lines, target_lines))


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """Reads a ``source<TAB>target`` file into ``(source, target)`` pairs.

    Raises:
        DataFormatError: bad UTF-8, an empty line, a line without exactly two tab-separated
            columns, or an empty column (file and line number in each case).
    """
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataFormatError(
                f"{path}: line {number} has {len(columns)} tab-separated columns, expected 2 "
                "(source<TAB>target)"
            )
        if not columns[0].strip() or not columns[1].strip():
            raise DataFormatError(f"{path}: line {number} has an empty column")
        pairs.append((columns[0], columns[1]))
    return pairs


def text_dir_splits(
    directory: str | Path, source_lang: str = "pt", target_lang: str = "en"
) -> list[str]:
    """The splits a directory corpus holds: the stems with both ``<stem>.<source_lang>`` and
    ``<stem>.<target_lang>``, or a ``<stem>.tsv``, sorted."""
    files = {p.name for p in Path(directory).iterdir() if p.is_file()}
    stems = {name[: -len(".tsv")] for name in files if name.endswith(".tsv")}
    for name in files:
        stem, _, lang = name.rpartition(".")
        if stem and lang == source_lang and f"{stem}.{target_lang}" in files:
            stems.add(stem)
    return sorted(stem for stem in stems if stem)


def read_text_dir(
    directory: str | Path, split: str, source_lang: str = "pt", target_lang: str = "en"
) -> list[tuple[str, str]]:
    """Reads one split of a directory corpus.

    The directory holds ``<stem>.<source_lang>`` and ``<stem>.<target_lang>`` (or
    ``<stem>.tsv``, source first) for each split. The canonical splits look for their usual
    stems: ``train``, ``dev``/``val``/``validation`` or ``test``; any other split is read from
    the files of that name, e.g. FLORES' ``devtest.pt``/``devtest.en``.

    Args:
        directory: the corpus directory.
        split: ``train``, ``validation``, ``test``, or the stem of the split's files.
        source_lang, target_lang: the language codes that end the file names.

    Returns:
        The split's ``(source, target)`` pairs.

    Raises:
        DataFormatError: no file for the split (the message lists the splits the directory
            holds, and its files), or any of the errors of `read_aligned_files` / `read_tsv`.
    """
    directory = Path(directory)
    if not split or split != Path(split).name or split.startswith("."):
        raise DataFormatError(f"split {split!r} is not a file stem: name it without a path")
    stems = SPLIT_STEMS.get(split, (split,))
    for stem in stems:
        source_path = directory / f"{stem}.{source_lang}"
        target_path = directory / f"{stem}.{target_lang}"
        if source_path.is_file() and target_path.is_file():
            return read_aligned_files(source_path, target_path)
        tsv_path = directory / f"{stem}.tsv"
        if tsv_path.is_file():
            return read_tsv(tsv_path)
    wanted = ", ".join(f"{stem}.{source_lang}+{stem}.{target_lang} or {stem}.tsv" for stem in stems)
    splits = text_dir_splits(directory, source_lang, target_lang)
    existing = sorted(p.name for p in directory.iterdir() if p.is_file())
    raise DataFormatError(
        f"{directory}: no files for split {split!r} (looked for {wanted}); "
        f"splits found: {', '.join(splits) or 'none'} (--split NAME); "
        f"files present: {existing or 'none'}"
    )
