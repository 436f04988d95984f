"""Every user error of the CLI: one line on stderr, no traceback, exit code 2, nothing written.

In process (`cli.main`), in a temporary working directory holding a few wrong inputs: missing
files, bad tarballs, unknown datasets, directories that are not models, bad flags.
"""

import socket

import pytest

from tf_transformer import cli
from tf_transformer.errors import InvalidValueError, MissingFileError, UnreadableFileError


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with wrong inputs: an existing run, a fake SavedModel, and so on."""
    (tmp_path / "empty").mkdir()
    run = tmp_path / "run"  # config.json, but no data record, tokenizers or checkpoints
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text('{"model": {}}')
    (run / "checkpoints" / "checkpoint").write_text("keep me")
    fake = tmp_path / "fake_saved_model" / "1"  # looks like a SavedModel, is not one
    fake.mkdir(parents=True)
    (fake / "saved_model.pb").write_bytes(b"not a protobuf")
    (tmp_path / "not_a_tarball.tar.gz").write_bytes(b"\x00" * 100)
    (tmp_path / "notes.txt").write_text("olá\thello\n")
    (tmp_path / "no_tab.tsv").write_text("olá hello\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _snapshot(root):
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_mtime_ns, p.is_file() and p.read_bytes())
        for p in sorted(root.rglob("*"))
    }


# (arguments, a piece of the error line). Wrong values the parser already refuses.
BAD_FLAGS = [
    (["train", "--epochs", "-1"], "must be a positive integer, got -1"),
    (["train", "--max-steps", "0"], "must be a positive integer, got 0"),
    (["train", "--max-minutes", "-5"], "must be a positive number, got -5"),
    (["train", "--preset", "huge"], "invalid choice: 'huge'"),
    (["train", "--strategy", "tpu"], "invalid choice: 'tpu'"),
    (["train", "--mixed-precision", "float8"], "invalid choice: 'float8'"),
    (["train", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["translate", "run", "--beam-size", "-1", "olá"], "must be a positive integer, got -1"),
    (["translate", "run", "--batch-size", "0"], "must be a positive integer, got 0"),
    (["evaluate", "run", "--limit", "-3"], "must be a positive integer, got -3"),
    (["evaluate", "run", "--beam-size", "0"], "must be a positive integer, got 0"),
    (["export", "run", "--version", "-1"], "must be a positive integer, got -1"),
    (["export", "run", "--max-new-tokens", "zero"], "invalid positive_int value: 'zero'"),
    (["serve"], "the following arguments are required: PATH"),
    (["serve", "run", "--port", "x"], "invalid int value: 'x'"),
    (["serving"], "invalid choice: 'serving'"),
    ([], "the following arguments are required: COMMAND"),
]

# Wrong inputs found once the command runs.
BAD_INPUTS = [
    # missing files and unknown datasets
    (["train", "--dataset", "missing_dir", "--run-dir", "new"], "unknown data spec 'missing_dir'"),
    (["train", "--dataset", "tatoeba", "--run-dir", "new"], "unknown data spec 'tatoeba'"),
    (["train", "--dataset", "empty", "--run-dir", "new"], "empty"),
    (["train", "--dataset", "notes.txt", "--run-dir", "new"], "must be a .tsv file"),
    (["train", "--dataset", "no_tab.tsv", "--run-dir", "new"], "no_tab.tsv"),
    # bad tarballs
    (
        ["train", "--dataset", "ted_hrlr", "--tarball", "missing.tar.gz", "--run-dir", "new"],
        "missing.tar.gz: no such file",
    ),
    (
        ["train", "--dataset", "ted_hrlr", "--tarball", "not_a_tarball.tar.gz", "--run-dir", "n"],
        "sha256 mismatch, refusing to read it",
    ),
    (
        ["train", "--dataset", "sample", "--tarball", "not_a_tarball.tar.gz", "--run-dir", "n"],
        "a tarball is for the TED data (ted_hrlr) only",
    ),
    # an existing run is neither clobbered nor deleted when its replacement's data is bad
    (["train", "--run-dir", "run"], "already exists; pass --resume"),
    (["train", "--run-dir", "run", "--overwrite", "--dataset", "missing"], "unknown data spec"),
    (["train", "--run-dir", "empty", "--resume"], "not a run directory"),
    # directories that are not models
    (["evaluate", "missing", "--dataset", "sample"], "neither a run directory"),
    (["evaluate", "notes.txt", "--dataset", "sample"], "neither a run directory"),
    (["evaluate", "empty", "--dataset", "sample"], "not a run directory"),
    (["evaluate", "run"], "records no dataset: pass --dataset"),
    (["evaluate", "fake_saved_model"], "does not record the data it was trained on"),
    (["evaluate", "fake_saved_model", "--dataset", "sample"], "cannot load the model"),
    (["translate", "missing", "olá"], "does not exist"),
    (["translate", "empty", "olá"], "not a run directory"),
    (["translate", "run", "olá"], "No tokenizers in run/tokenizers"),
    (["translate", "fake_saved_model", "olá"], "cannot load the model"),
    (["export", "missing"], "not a run directory"),
    (["export", "fake_saved_model"], "not a run directory"),
    # a server that is not there
    (["translate", "--server", "http://127.0.0.1:{port}", "olá"], "Cannot reach"),
]


def _check_one_line(capsys, command, expected):
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"tf-transformer{command}: error: "), captured.err
    assert expected in captured.err
    assert "Traceback" not in captured.err
    return captured


@pytest.mark.parametrize(
    ("arguments", "expected"), BAD_FLAGS, ids=[" ".join(a) or "nothing" for a, _ in BAD_FLAGS]
)
def test_bad_flags(workdir, capsys, arguments, expected):
    before = _snapshot(workdir)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(arguments)
    assert exit_info.value.code == 2
    command = f" {arguments[0]}" if arguments and arguments[0] in cli.COMMANDS else ""
    _check_one_line(capsys, command, expected)
    assert _snapshot(workdir) == before


@pytest.mark.parametrize(
    ("arguments", "expected"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS]
)
def test_bad_inputs(workdir, capsys, arguments, expected):
    arguments = [a.format(port=_closed_port()) for a in arguments]
    before = _snapshot(workdir)
    assert cli.main(arguments) == 2
    captured = _check_one_line(capsys, f" {arguments[0]}", expected)
    assert captured.out == ""
    assert _snapshot(workdir) == before


def _raise(error):
    raise error


def test_only_our_errors_are_one_line_a_bug_shows_its_traceback(monkeypatch, capsys):
    import numpy as np

    from tf_transformer.backends.versions import check_version
    from tf_transformer.commands import translate

    def raises(error_fn):
        try:
            error_fn()
        except Exception as error:  # noqa: BLE001 - the error to classify
            return error
        raise AssertionError("no error")

    ours = raises(lambda: check_version("/nonexistent", 0))  # our InvalidValueError
    library = raises(lambda: np.zeros(2).reshape(3))  # a ValueError from inside numpy
    assert isinstance(ours, ValueError) and isinstance(library, ValueError)
    assert cli.is_user_error(ours) and not cli.is_user_error(library)
    # Told by type alone, wherever raised: not by the words or the line that raised it.
    for typed in (InvalidValueError, MissingFileError, UnreadableFileError):
        assert cli.is_user_error(typed("a bad value, path or file"))
    for builtin in (ValueError(str(ours)), FileNotFoundError("x"), PermissionError("x")):
        assert not cli.is_user_error(raises(lambda error=builtin: _raise(error)))

    def bug(args):
        np.zeros(2).reshape(3)

    monkeypatch.setattr(translate, "run", bug)
    with pytest.raises(ValueError, match="cannot reshape"):
        cli.main(["translate", "run", "olá"])
    assert "error:" not in capsys.readouterr().err
