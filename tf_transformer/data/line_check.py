"""One pass over a corpus file, in bounded memory: its line count, and the first bad line.

A corpus is checked before training (`tf_transformer.data.text_files`) and then streamed by
tf.data, which reads bytes and cannot say which file and line broke. The check reads the file
(plain or gzip) in chunks that end at a line end, so memory stays at a few chunks whatever the
file's size. Within a chunk, C code does the work: `bytes.count` counts the lines,
`bytes.decode` finds the first invalid UTF-8 byte and a few regular expressions find the first
empty line or bad TSV column; only the line they point at is decoded in Python, to say what is
wrong with it. Measured on a 2-core AMD EPYC (AVX-512), one engineer's share of it: see
docs/data.md ("How fast is the check").
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

import numpy as np

from tf_transformer.data.errors import DataFormatError
from tf_transformer.errors import UnreadableFileError

CHUNK_BYTES = 16 << 20
# Whitespace, as bytes: a line of only these is empty (ASCII only; str.isspace also counts
# e.g. U+00A0, which a byte pattern cannot see without decoding every line).
_SPACE = rb"[ \t\r\x0b\x0c\x1c-\x1f]"
_EMPTY = re.compile(rb"\n" + _SPACE + rb"*\n")
# A TSV line needs exactly one tab and something that is not whitespace on each side of it.
_TSV_BAD = re.compile(
    rb"\n[^\t\n]*\n"  # no tab
    rb"|\n[^\t\n]*\t[^\t\n]*\t"  # two tabs or more
    rb"|\n" + _SPACE + rb"*\t"  # empty source
    rb"|\n[^\t\n]*\t" + _SPACE + rb"*\n"  # empty target
)


def line_problem(line: str, *, tsv: bool = False) -> str | None:
    """What is wrong with one decoded line (without its line end), or None."""
    if not line.strip():
        return "is empty"
    if tsv:
        columns = line.split("\t")
        if len(columns) != 2:
            return f"has {len(columns)} tab-separated columns, expected 2 (source<TAB>target)"
        if not columns[0].strip() or not columns[1].strip():
            return "has an empty column"
    return None


def open_corpus_file(path: str | Path):
    """`path` opened for reading bytes, through gzip when it ends in ``.gz``."""
    path = Path(path)
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as error:
        raise UnreadableFileError(f"{path}: cannot read it ({error.strerror or error})") from None


def _chunks(path: Path):
    """The file's bytes in chunks of whole lines (the last may lack its line end)."""
    with open_corpus_file(path) as handle:
        rest = b""
        while True:
            try:
                block = handle.read(CHUNK_BYTES)
            except (OSError, EOFError, zlib.error) as error:
                raise DataFormatError(f"{path}: cannot be read as gzip ({error})") from None
            if not block:
                break
            block = rest + block
            end = block.rfind(b"\n") + 1
            if end:
                yield block[:end]
                rest = block[end:]
            else:
                rest = block
        if rest:
            yield rest + b"\n"


def _first_bad(chunk: bytes, tsv: bool) -> int | None:
    """The offset in `chunk` (of whole lines, each ending in a newline) of the first line that
    may be bad: invalid UTF-8, or one the patterns match; None when all are good."""
    offsets = []
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as error:
        offsets.append(chunk.rfind(b"\n", 0, error.start) + 1)
    framed = b"\n" + chunk  # each line now starts after a newline, the first one too
    match = (_TSV_BAD if tsv else _EMPTY).search(framed)
    if match:
        offsets.append(match.start())  # framed offset - 1 + 1: the line's start in `chunk`
    return min(offsets) if offsets else None


def check_lines(path: str | Path, *, tsv: bool = False) -> int:
    """Counts the lines of a corpus file, checking each (see `scan_lines`)."""
    return scan_lines(path, tsv=tsv)[0]


def scan_lines(
    path: str | Path, *, tsv: bool = False, mark_every: int | None = None
) -> tuple[int, tuple[int, ...] | None]:
    """Counts the lines of a corpus file, checking each: UTF-8, not empty, and for a TSV file
    two non-empty tab-separated columns; notes where every `mark_every`-th line starts.

    A final line without a newline counts; ``\r\n`` line ends are read as ``\n`` (as
    `tf.data.TextLineDataset` reads them).

    Args:
        path: the file, plain or gzip (``.gz``).
        tsv: check each line as ``source<TAB>target``.
        mark_every: note the byte offset of lines 0, N, 2N, ... and the file's size.

    Returns:
        The number of lines, and the marks: None without `mark_every`, for a gzip file (it
        cannot be read from an offset) and for a file whose last line has no newline.

    Raises:
        DataFormatError: the first bad line, by file and 1-based line number, or a ``.gz``
            file that is not gzip.
        UnreadableFileError: the file cannot be opened.
    """
    path = Path(path)
    lines = offset = 0
    marks = [] if mark_every and path.suffix != ".gz" else None
    for chunk in _chunks(path):
        bad = _first_bad(chunk, tsv)
        if bad is not None:
            _raise_at(path, chunk, bad, lines, tsv)
        count = chunk.count(b"\n")
        if marks is not None:
            first = -(-lines // mark_every) * mark_every  # the first marked line in the chunk
            if first < lines + count:
                ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == ord("\n"))
                starts = np.concatenate([[0], ends[:-1] + 1])  # where each line starts
                marks += (offset + starts[first - lines :: mark_every]).tolist()
        lines, offset = lines + count, offset + len(chunk)
    if marks is not None:
        size = path.stat().st_size
        marks = (*marks, size) if size == offset else None  # else: no final newline
    return lines, marks


def _raise_at(path: Path, chunk: bytes, offset: int, lines: int, tsv: bool) -> None:
    """Raises the error of the first bad line of `chunk` from `offset` (lines before the
    chunk: `lines`); returns when none is bad after all."""
    while offset is not None:
        end = chunk.index(b"\n", offset)
        number = lines + chunk.count(b"\n", 0, offset) + 1
        raw = chunk[offset:end]
        try:
            problem = line_problem(raw.decode("utf-8").removesuffix("\r"), tsv=tsv)
        except UnicodeDecodeError as error:
            problem = f"is not valid UTF-8 ({error.reason} at byte {error.start})"
        if problem:
            raise DataFormatError(f"{path}: line {number} {problem}")
        # A pattern's false alarm (none known): look on from the next line.
        following = _first_bad(chunk[end + 1 :], tsv)
        offset = None if following is None else end + 1 + following
