"""Tests for tf_transformer.data sources: TFDS (mocked, prepared, dead URL), tarball, text files."""

import functools
import hashlib
import http.server
import io
import resource
import socket
import tarfile
import threading
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from tf_transformer.data import DataFormatError, DatasetUnavailableError, load_dataset
from tf_transformer.data.ted_tarball import DEAD_URL
from tf_transformer.errors import TransformerError

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
TED_TFDS_DIR = SHARED / "data" / "ted_hrlr_validation" / "tfds_data_dir"


def _decode(ds):
    return [(pt.numpy().decode(), en.numpy().decode()) for pt, en in ds]


def _write_tarball(path, files):
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tfds_mock_data_through_load_dataset(tmp_path):
    with tfds.testing.mock_data(num_examples=3):
        pairs = _decode(load_dataset("ted_hrlr", "dev", data_dir=tmp_path))
    assert len(pairs) == 3
    assert all(isinstance(pt, str) and isinstance(en, str) for pt, en in pairs)


def test_tfds_prepared_validation_split_offline():
    if not TED_TFDS_DIR.is_dir():
        pytest.skip("shared TFDS data dir absent")
    pairs = _decode(load_dataset("ted_hrlr", "validation", data_dir=TED_TFDS_DIR, download=False))
    assert len(pairs) == 1193
    assert pairs[0] == ("tinham comido peixe com batatas fritas ?", "did they eat fish and chips ?")


def test_tfds_dead_url_gives_one_clear_error(tmp_path, monkeypatch):
    def dead_download(self, *args, **kwargs):
        raise tfds.download.DownloadError(f"Failed to get url {DEAD_URL}. HTTP code: 404.")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", dead_download)
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("ted_hrlr_translate/pt_to_en", "train", data_dir=tmp_path)
    message = str(info.value)
    assert DEAD_URL in message
    assert "--tarball" in message
    assert "web.archive.org" in message
    assert "\n" not in message  # the CLI prints it as its one error line
    assert isinstance(info.value, TransformerError)


def test_tfds_not_prepared_without_download_is_unavailable(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="--tarball"):
        load_dataset("ted_hrlr", "test", data_dir=tmp_path, download=False)


@pytest.fixture
def ted_tarball(tmp_path):
    base = "datasets/pt_to_en/"
    files = {
        base + "pt.train": "olá mundo .\nobrigado .\n\n",
        base + "en.train": "hello world .\nthank you .\n\n",
        base + "pt.dev": "sim\n\nnão\n",  # the pair with an empty side is skipped, as in TFDS
        base + "en.dev": "yes\nmaybe\nno\n",
        base + "pt.test": "um\n",
        base + "en.test": "one\n",
        "datasets/es_to_pt/es.train": "hola\n",
    }
    path = tmp_path / "qi18naacl-dataset.tar.gz"
    return path, _write_tarball(path, files)


def test_tarball_splits_read_like_tfds(ted_tarball):
    path, digest = ted_tarball
    train = _decode(load_dataset("ted_hrlr", "train", tarball=path, sha256=digest))
    dev = _decode(load_dataset("ted_hrlr", "dev", tarball=path, sha256=digest))
    test = _decode(load_dataset("ted_hrlr", "test", tarball=str(path), sha256=digest))
    assert train == [("olá mundo .", "hello world ."), ("obrigado .", "thank you .")]
    assert dev == [("sim", "yes"), ("não", "no")]
    assert test == [("um", "one")]


def test_tarball_wrong_checksum_is_refused(ted_tarball):
    path, digest = ted_tarball
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("ted_hrlr", "train", tarball=path)  # default: the TFDS digest
    assert "216a86c3df4d4f522856fe9b920ff5be6b394d769cc88974ae8f9f5546953bbc" in str(info.value)
    assert digest in str(info.value)


def test_tarball_without_pt_to_en_is_a_format_error(tmp_path):
    path = tmp_path / "other.tar.gz"
    digest = _write_tarball(path, {"datasets/es_to_pt/es.dev": "hola\n"})
    with pytest.raises(DataFormatError, match="datasets/pt_to_en/en.dev"):
        load_dataset("ted_hrlr", "validation", tarball=path, sha256=digest)


def test_tarball_that_is_missing_or_not_a_tar_archive(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.tar.gz: no such file"):
        load_dataset("ted_hrlr", "train", tarball=tmp_path / "missing.tar.gz")
    junk = _write(tmp_path / "junk.tar.gz", b"\x1f\x8b not really gzip")
    with pytest.raises(DataFormatError, match="not a readable tar archive"):
        load_dataset("ted_hrlr", "train", tarball=junk, sha256=None)
    with pytest.raises(ValueError, match=r"for the TED data \(ted_hrlr\) only"):
        load_dataset("sample", "train", tarball=junk)


def test_tarball_url_that_cannot_be_fetched(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/qi18naacl-dataset.tar.gz"
    with pytest.raises(DatasetUnavailableError, match="--tarball PATH") as info:
        load_dataset("ted_hrlr", "train", tarball=url, data_dir=tmp_path)
    assert f"cannot download {url}" in str(info.value)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_tarball_download_on_a_full_disk_says_so_and_names_the_folder(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "ted.tar.gz").write_bytes(bytes(1 << 20))
    handler = functools.partial(_QuietHandler, directory=str(served))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/ted.tar.gz"
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # writes past it: EFBIG
        try:
            with pytest.raises(DatasetUnavailableError) as info:
                load_dataset("ted_hrlr", "train", tarball=url, data_dir=tmp_path)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            server.shutdown()
    message = str(info.value)
    assert message.startswith(f"cannot save the download of {url} to {tmp_path / 'tf_transformer'}")
    assert "File too large" in message and "cannot download" not in message


@pytest.mark.parametrize(
    "error",
    [PermissionError(13, "Permission denied", "/cache/tf_transformer"), KeyError("a bug")],
    ids=["permission denied", "a bug"],
)
def test_tarball_fetch_failure_that_is_not_the_network(tmp_path, monkeypatch, error):
    import tensorflow as tf

    def get_file(**kwargs):
        raise error

    monkeypatch.setattr(tf.keras.utils, "get_file", get_file)
    url = "https://example.com/qi18naacl-dataset.tar.gz"
    if isinstance(error, OSError):  # said with its path, not as a download failure
        message = f"cannot save the download of {url} to /cache/tf_transformer: Permission denied"
        with pytest.raises(DatasetUnavailableError, match=message):
            load_dataset("ted_hrlr", "train", tarball=url, data_dir=tmp_path)
    else:  # a bug keeps its type and traceback
        with pytest.raises(KeyError) as info:
            load_dataset("ted_hrlr", "train", tarball=url, data_dir=tmp_path)
        assert info.value is error and info.traceback[-1].name == "get_file"


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.mark.parametrize("dev_stem", ["dev", "val", "validation"])
def test_text_dir_reads_aligned_files(tmp_path, dev_stem):
    _write(tmp_path / "train.pt", "um gato .\r\ndois cães .\n")
    _write(tmp_path / "train.en", "a cat .\r\ntwo dogs .\n")
    _write(tmp_path / f"{dev_stem}.pt", "sim\n")
    _write(tmp_path / f"{dev_stem}.en", "yes")  # no final newline
    assert _decode(load_dataset(tmp_path, "train")) == [
        ("um gato .", "a cat ."),
        ("dois cães .", "two dogs ."),
    ]
    assert _decode(load_dataset(str(tmp_path), "dev")) == [("sim", "yes")]


def test_text_dir_misaligned_names_both_counts(tmp_path):
    _write(tmp_path / "train.pt", "a\nb\nc\n")
    _write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(DataFormatError, match=r"train.pt has 3 lines but .*train.en has 2 lines"):
        load_dataset(tmp_path, "train")


def test_text_dir_empty_line_names_file_and_line(tmp_path):
    _write(tmp_path / "test.pt", "a\nb\n")
    _write(tmp_path / "test.en", "a\n  \nc\n")
    with pytest.raises(DataFormatError, match=r"test.en: line 2 is empty"):
        load_dataset(tmp_path, "test")


def test_text_dir_bad_utf8_names_file_and_line(tmp_path):
    _write(tmp_path / "train.pt", b"ok\nstill ok\nbad \xff byte\n")
    _write(tmp_path / "train.en", "a\nb\nc\n")
    with pytest.raises(DataFormatError, match=r"train.pt: line 3 is not valid UTF-8"):
        load_dataset(tmp_path, "train")


def test_text_dir_missing_split_lists_existing_files(tmp_path):
    _write(tmp_path / "train.pt", "a\n")
    _write(tmp_path / "train.en", "a\n")
    with pytest.raises(DataFormatError) as info:
        load_dataset(tmp_path, "test")
    assert "'test'" in str(info.value)
    assert "['train.en', 'train.pt']" in str(info.value)


def test_text_dir_reads_any_split_it_holds_and_lists_them(tmp_path):
    _write(tmp_path / "devtest.pt", "olá\nadeus\n")
    _write(tmp_path / "devtest.en", "hello\ngoodbye\n")
    _write(tmp_path / "dev.pt", "a\n")
    _write(tmp_path / "dev.en", "a\n")
    _write(tmp_path / "extra.tsv", "b\tb\n")
    _write(tmp_path / "notes.pt", "only one side\n")
    assert _decode(load_dataset(tmp_path, "devtest")) == [("olá", "hello"), ("adeus", "goodbye")]
    assert _decode(load_dataset(tmp_path, "extra")) == [("b", "b")]
    assert _decode(load_dataset(tmp_path, "validation")) == [("a", "a")]  # dev.*, as before
    with pytest.raises(DataFormatError) as info:
        load_dataset(tmp_path, "test")
    assert "splits found: dev, devtest, extra (--split NAME)" in str(info.value)
    with pytest.raises(DataFormatError, match="splits found: dev, devtest, extra"):
        load_dataset(tmp_path, "devtest2")
    with pytest.raises(DataFormatError, match="not a file stem"):
        load_dataset(tmp_path, "../devtest")


def test_tsv_file_and_tsv_split_in_dir(tmp_path):
    _write(tmp_path / "test.tsv", "olá\thello\nadeus\tgoodbye\n")
    expected = [("olá", "hello"), ("adeus", "goodbye")]
    assert _decode(load_dataset(tmp_path / "test.tsv", "train")) == expected
    assert _decode(load_dataset(tmp_path, "test")) == expected


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("a\tb\nc\td\te\n", r"line 2 has 3 tab-separated columns"),
        ("a\tb\nc d\n", r"line 2 has 1 tab-separated columns"),
        ("a\tb\n\t x\n", r"line 2 has an empty column"),
        ("a\tb\n\nc\td\n", r"line 2 is empty"),
        (b"a\tb\nc\td\n\xc3\x28\te\n", r"line 3 is not valid UTF-8"),
    ],
)
def test_tsv_bad_lines_name_the_line(tmp_path, content, pattern):
    path = _write(tmp_path / "pairs.tsv", content)
    with pytest.raises(DataFormatError, match=pattern):
        load_dataset(path, "train")


def test_unknown_spec_and_split_list_valid_forms(tmp_path):
    with pytest.raises(ValueError, match="'sample'") as info:
        load_dataset("wmt14", "train")
    assert "ted_hrlr" in str(info.value) and "'sample_written'" in str(info.value)
    with pytest.raises(ValueError, match="unknown split"):
        load_dataset("sample", "holdout")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataFormatError, match=".tsv"):
        load_dataset(tmp_path / "notes.txt", "train")


def test_sample_spec_is_the_embedded_corpus():
    sample = pytest.importorskip("tf_transformer.data.sample")
    pairs = _decode(load_dataset("sample", "validation"))
    assert len(pairs) == 1000
    assert pairs == sample.sample_pairs("dev")


def test_sample_written_spec_is_the_written_style():
    sample = pytest.importorskip("tf_transformer.data.sample")
    pairs = _decode(load_dataset("sample_written", "test"))
    assert pairs == sample.sample_pairs("test", style="written")
    assert pairs[0][1][0].isupper() and pairs[0][1].endswith((".", "?"))
    backward = _decode(load_dataset("sample_written", "dev", target_lang="pt", source_lang="en"))
    assert backward[:3] == [
        (en, pt) for pt, en in sample.sample_pairs("dev", size=3, style="written")
    ]
