"""Parallel text corpora on disk: aligned ``<split>.<src>``/``<split>.<tgt>`` files or TSV files,
plain or gzip, whole or in numbered shards; found, counted and checked, never read whole.

A split's files are ``<stem>.<lang>`` (or ``<stem>.tsv``), each optionally gzip-compressed
(``.gz``) and optionally cut into shards numbered before the language: ``train.00.pt``,
``train.01.pt``, ... with ``train.00.en``, ``train.01.en``, ... (what ``split -d -l 1000000
--additional-suffix=.pt train.pt train.`` writes). The pairs are streamed by
`tf_transformer.data.streams`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from tf_transformer.data.errors import DataFormatError
from tf_transformer.data.line_check import scan_lines

# Accepted file stems for each canonical split, in the order they are looked for.
SPLIT_STEMS = {
    "train": ("train",),
    "validation": ("dev", "val", "validation"),
    "test": ("test",),
}
# Every MARK_LINES-th line's byte offset is noted, so a plain file is read from any of them.
MARK_LINES = 1000
# <stem>[.<shard number>].<lang or tsv>[.gz]
_FILE_NAME = re.compile(r"^(?P<stem>.+?)(?:\.(?P<shard>\d+))?\.(?P<ext>[^.]+?)(?P<gz>\.gz)?$")


@dataclasses.dataclass(frozen=True)
class CorpusFiles:
    """One split of a corpus as files: its shards in order, and their line counts.

    Attributes:
      sources: each shard's source file (for TSV, the TSV file).
      targets: each shard's target file, or None for TSV files.
      lines: each shard's number of lines (pairs).
      marks: for each shard, the byte offsets in its source file (and target file) of lines
        0, `mark_lines`, 2 x `mark_lines`, ... and of its end; None when a file is gzip or
        its last line has no newline. With marks for every shard, the corpus is read in pieces
        from anywhere in its files (`FileCorpus`).
      mark_lines: the lines between two marks.
    """

    sources: tuple[Path, ...]
    targets: tuple[Path, ...] | None
    lines: tuple[int, ...]
    marks: tuple | None = None
    mark_lines: int = MARK_LINES

    @property
    def size(self) -> int:
        """The number of pairs."""
        return sum(self.lines)

    @property
    def is_tsv(self) -> bool:
        return self.targets is None


def checked_files(sources, targets=None, *, mark_lines: int = MARK_LINES) -> CorpusFiles:
    """Counts and checks every file of a corpus (see `scan_lines`), that each target file has
    its source file's line count, and notes where every `mark_lines`-th line starts.

    Raises:
        DataFormatError: a bad line (file and line number), or misaligned files (both counts).
    """
    scans = [scan_lines(path, tsv=targets is None, mark_every=mark_lines) for path in sources]
    lines = [count for count, _ in scans]
    marks = [(source_marks,) for _, source_marks in scans]
    for index, (source, target, count) in enumerate(zip(sources, targets or (), lines)):
        target_count, target_marks = scan_lines(target, mark_every=mark_lines)
        if target_count != count:
            raise DataFormatError(
                f"misaligned files: {source} has {count} lines but {target} has "
                f"{target_count} lines"
            )
        marks[index] += (target_marks,)
    seekable = all(all(side is not None for side in shard) for shard in marks)
    return CorpusFiles(
        tuple(sources),
        None if targets is None else tuple(targets),
        tuple(lines),
        tuple(marks) if seekable else None,
        mark_lines,
    )


def _shards(directory: Path, stem: str, ext: str) -> dict[int, Path]:
    """The files of `stem` with extension `ext` by shard number (-1: not sharded)."""
    found: dict[int, Path] = {}
    for path in directory.iterdir():
        match = _FILE_NAME.match(path.name)
        if not (match and path.is_file() and match["stem"] == stem and match["ext"] == ext):
            continue
        shard = -1 if match["shard"] is None else int(match["shard"])
        if shard in found:
            raise DataFormatError(f"{directory}: both {found[shard].name} and {path.name}")
        found[shard] = path
    return found


def split_files(directory: Path, stem: str, source_lang: str, target_lang: str):
    """The checked files of split `stem`, or None when the directory has none."""
    sources = _shards(directory, stem, source_lang)
    targets = _shards(directory, stem, target_lang)
    if sources or targets:
        for shard in sorted(set(sources) ^ set(targets)):
            have, lang = (sources, target_lang) if shard in sources else (targets, source_lang)
            raise DataFormatError(f"{have[shard]} has no {lang} file beside it")
        order = sorted(sources)
        return checked_files([sources[s] for s in order], [targets[s] for s in order])
    tsv = _shards(directory, stem, "tsv")
    return checked_files([tsv[s] for s in sorted(tsv)]) if tsv else None


def is_tsv_file(path: Path) -> bool:
    """Whether `path` is named as a TSV corpus: ``.tsv`` or ``.tsv.gz``."""
    return path.name.lower().endswith((".tsv", ".tsv.gz"))


def text_dir_splits(
    directory: str | Path, source_lang: str = "pt", target_lang: str = "en"
) -> list[str]:
    """The splits a directory corpus holds: the stems with both ``<stem>.<source_lang>`` and
    ``<stem>.<target_lang>``, or a ``<stem>.tsv`` (sharded, gzip or not), sorted."""
    found: dict[str, set[str]] = {}
    for path in Path(directory).iterdir():
        match = _FILE_NAME.match(path.name)
        if match and path.is_file():
            found.setdefault(match["stem"], set()).add(match["ext"])
    return sorted(
        stem for stem, exts in found.items() if "tsv" in exts or {source_lang, target_lang} <= exts
    )


def read_text_dir(
    directory: str | Path, split: str, source_lang: str = "pt", target_lang: str = "en"
) -> CorpusFiles:
    """Finds and checks one split of a directory corpus.

    The directory holds ``<stem>.<source_lang>`` and ``<stem>.<target_lang>`` (or
    ``<stem>.tsv``, source first) for each split, sharded or gzip as the module says. The
    canonical splits look for their usual stems: ``train``, ``dev``/``val``/``validation`` or
    ``test``; any other split is read from the files of that name, e.g. FLORES'
    ``devtest.pt``/``devtest.en``.

    Args:
        directory: the corpus directory.
        split: ``train``, ``validation``, ``test``, or the stem of the split's files.
        source_lang, target_lang: the language codes that end the file names.

    Returns:
        The split's files, counted and checked.

    Raises:
        DataFormatError: no file for the split (the message lists the splits the directory
            holds, and its files), a shard without its other language, or any error of
            `checked_files`.
    """
    directory = Path(directory)
    if not split or split != Path(split).name or split.startswith("."):
        raise DataFormatError(f"split {split!r} is not a file stem: name it without a path")
    stems = SPLIT_STEMS.get(split, (split,))
    for stem in stems:
        files = split_files(directory, stem, source_lang, target_lang)
        if files is not None:
            return files
    wanted = ", ".join(f"{stem}.{source_lang}+{stem}.{target_lang} or {stem}.tsv" for stem in stems)
    splits = text_dir_splits(directory, source_lang, target_lang)
    existing = sorted(p.name for p in directory.iterdir() if p.is_file())
    raise DataFormatError(
        f"{directory}: no files for split {split!r} (looked for {wanted}); "
        f"splits found: {', '.join(splits) or 'none'} (--split NAME); "
        f"files present: {existing or 'none'}"
    )
