"""The one-pass check of a corpus file: exact line counts (plain, gzip, across chunks) and the
first bad line named by file and number."""

import gzip

import pytest

from tf_transformer.data import DataFormatError, line_check
from tf_transformer.data.line_check import check_lines, scan_lines


def _write(path, data: bytes):
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["lines.txt", "lines.txt.gz"])
@pytest.mark.parametrize(
    ("data", "count"),
    [(b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\r\nb\r\n", 2), ("é\nção\n".encode(), 2)],
)
def test_counts_lines_as_text_line_dataset_reads_them(tmp_path, name, data, count):
    assert check_lines(_write(tmp_path / name, data)) == count


def test_counts_and_finds_bad_lines_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(line_check, "CHUNK_BYTES", 7)  # chunks end inside lines
    lines = [f"line {i:03d} é" for i in range(100)]
    path = _write(tmp_path / "x.pt", "\n".join(lines).encode())
    assert check_lines(path) == 100
    lines[71] = " \t "
    _write(path, "\n".join(lines).encode())
    with pytest.raises(DataFormatError, match=r"x.pt: line 72 is empty$"):
        check_lines(path)


@pytest.mark.parametrize(
    ("data", "tsv", "message"),
    [
        (b"ok\n\nnot reached \xff\n", False, "line 2 is empty"),
        (
            b"ok\nbad \xff byte\n\n",
            False,
            "line 2 is not valid UTF-8 (invalid start byte at byte 4)",
        ),
        (
            b"a\tb\nc\td\te\n",
            True,
            "line 2 has 3 tab-separated columns, expected 2 (source<TAB>target)",
        ),
        (
            b"a\tb\nc d\n",
            True,
            "line 2 has 1 tab-separated columns, expected 2 (source<TAB>target)",
        ),
        (b"a\tb\n \tx\n", True, "line 2 has an empty column"),
        (b"a\tb\nx\t \r\n", True, "line 2 has an empty column"),
        (b"a\tb\nc\td", False, None),
    ],
)
def test_the_first_bad_line_is_named(tmp_path, data, tsv, message):
    path = _write(tmp_path / "shard.07.tsv.gz", data)
    if message is None:
        assert check_lines(path, tsv=tsv) == 2
        return
    with pytest.raises(DataFormatError) as info:
        check_lines(path, tsv=tsv)
    assert str(info.value) == f"{path}: {message}"


def test_a_gz_file_that_is_not_gzip_is_a_format_error(tmp_path):
    path = tmp_path / "train.pt.gz"
    path.write_bytes(b"plain text\n")
    with pytest.raises(DataFormatError, match=r"train.pt.gz: cannot be read as gzip"):
        check_lines(path)


@pytest.mark.parametrize("chunk_bytes", [7, 1 << 20])
def test_marks_are_the_byte_offsets_of_every_nth_line(tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(line_check, "CHUNK_BYTES", chunk_bytes)
    data = "ab\ncd\r\nção\nx\ny\n".encode()  # lines start at bytes 0, 3, 7, 13, 15
    path = _write(tmp_path / "x.pt", data)
    assert scan_lines(path, mark_every=2) == (5, (0, 7, 15, 17))
    assert scan_lines(path, mark_every=1) == (5, (0, 3, 7, 13, 15, 17))
    assert scan_lines(path) == (5, None)
    # A last line without a newline, or gzip: no marks (the file is read whole).
    assert scan_lines(_write(tmp_path / "y.pt", data[:-1]), mark_every=2) == (5, None)
    assert scan_lines(_write(tmp_path / "z.pt.gz", data), mark_every=2) == (5, None)
