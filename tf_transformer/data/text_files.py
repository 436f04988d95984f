"""Parallel text corpora on disk: aligned ``<split>.pt``/``<split>.en`` files or TSV files."""

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


def read_aligned_files(pt_path: str | Path, en_path: str | Path) -> list[tuple[str, str]]:
    """Reads two line-aligned files into ``(pt, en)`` pairs.

    Raises:
        DataFormatError: bad UTF-8 or an empty line (file and line number), or the two files
            have different line counts (both counts).
    """
    pt_lines = read_lines(pt_path)
    en_lines = read_lines(en_path)
    if len(pt_lines) != len(en_lines):
        raise DataFormatError(
            f"misaligned files: {pt_path} has {len(pt_lines)} lines but {en_path} has "
            f"{len(en_lines)} lines"
        )
    return list(zip(pt_lines, en_lines))


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """Reads a ``pt<TAB>en`` file into ``(pt, en)`` pairs.

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
                "(pt<TAB>en)"
            )
        if not columns[0].strip() or not columns[1].strip():
            raise DataFormatError(f"{path}: line {number} has an empty column")
        pairs.append((columns[0], columns[1]))
    return pairs


def read_text_dir(directory: str | Path, split: str) -> list[tuple[str, str]]:
    """Reads one split of a directory corpus.

    The directory holds ``<stem>.pt`` and ``<stem>.en`` (or ``<stem>.tsv``) for each split, where
    the stem is ``train``, ``dev``/``val``/``validation`` or ``test``.

    Args:
        directory: the corpus directory.
        split: a canonical split name: ``train``, ``validation`` or ``test``.

    Returns:
        The split's ``(pt, en)`` pairs.

    Raises:
        DataFormatError: no file for the split (the message lists the files that exist), or
            any of the errors of `read_aligned_files` / `read_tsv`.
    """
    directory = Path(directory)
    for stem in SPLIT_STEMS[split]:
        pt_path, en_path = directory / f"{stem}.pt", directory / f"{stem}.en"
        if pt_path.is_file() and en_path.is_file():
            return read_aligned_files(pt_path, en_path)
        tsv_path = directory / f"{stem}.tsv"
        if tsv_path.is_file():
            return read_tsv(tsv_path)
    wanted = ", ".join(f"{stem}.pt+{stem}.en or {stem}.tsv" for stem in SPLIT_STEMS[split])
    existing = sorted(p.name for p in directory.iterdir() if p.is_file())
    raise DataFormatError(
        f"{directory}: no files for split {split!r} (looked for {wanted}); "
        f"files present: {existing or 'none'}"
    )
