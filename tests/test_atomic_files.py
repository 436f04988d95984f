"""atomic_files: what we write gets the modes `open` and `mkdir` give under the umask (not
tempfile's private 0600/0700), so a server running as another user can read an export."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.export_helpers import tiny_export, tiny_objects
from tf_transformer.atomic_files import current_umask, write_directory, write_json
from tf_transformer.run_dir import RunDir


@pytest.fixture(params=[0o022, 0o077], ids=["umask-022", "umask-077"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def wrong_modes(root: Path, mask: int) -> dict[str, str]:
    """`{path: mode}` of each folder not 0777 & ~mask and each file not 0666 & ~mask under
    `root` (and `root` itself): empty when all follow the umask."""
    wrong = {}
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        expected = (0o777 if stat.S_ISDIR(mode) else 0o666) & ~mask
        if stat.S_IMODE(mode) != expected:
            wrong[str(path.relative_to(root.parent))] = oct(stat.S_IMODE(mode))
    return wrong


def test_current_umask_reads_the_umask_without_changing_it(umask):
    assert current_umask() == umask
    assert os.umask(umask) == umask


def test_run_files_follow_the_umask(umask, tmp_path):
    _, tokenizers, model = tiny_objects()
    run = RunDir(tmp_path / "run")
    run.write_config({"model": model.get_config()})
    write_json(run.best_record_path, {"step": 1})  # as ValidateEvery writes best.json
    tokenizers.save(run.tokenizers_path)
    for path in [run.config_path, run.best_record_path, run.tokenizers_path]:
        assert wrong_modes(path, umask) == {}
    tokenizers.save(run.tokenizers_path)  # replaced: still the umask's modes
    assert wrong_modes(run.tokenizers_path, umask) == {}


def test_a_written_directory_follows_the_umask_and_keeps_an_executable_executable(umask, tmp_path):
    def save(folder):
        Path(folder, "sub").mkdir(mode=0o700)
        Path(folder, "sub", "data").write_text("x")
        os.chmod(Path(folder, "sub", "data"), 0o600)
        Path(folder, "run.sh").write_text("#!/bin/sh\n")
        os.chmod(Path(folder, "run.sh"), 0o700)

    path = write_directory(tmp_path / "out", save, replace=False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((path / "sub").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((path / "sub" / "data").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((path / "run.sh").stat().st_mode) == 0o777 & ~umask


def test_a_ctranslate2_export_follows_the_umask(umask, tmp_path):
    pytest.importorskip("ctranslate2")
    from tf_transformer.backends.ctranslate2.export import export_ctranslate2

    _, tokenizers, model = tiny_objects()
    path = export_ctranslate2((model, tokenizers), tmp_path / "ct2")
    assert wrong_modes(path, umask) == {}


def test_a_litert_export_follows_the_umask(umask, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from tf_transformer.backends.litert.export import export_litert

    _, tokenizers, model = tiny_objects()
    path = export_litert(tokenizers, model, tmp_path / "litert")
    assert wrong_modes(path, umask) == {}


def test_a_saved_model_export_follows_the_umask():
    """The shared export (`saved_models/tiny/1`), written under this process's umask (022 for
    `make test`: tempfile alone would leave the version folder 0700)."""
    path, _ = tiny_export()
    assert wrong_modes(path, current_umask()) == {}
    assert wrong_modes(path.parent, current_umask()) == {}  # the model base path too


def test_only_write_errors_become_write_errors_and_only_a_full_disk_is_out_of_space(tmp_path):
    import tensorflow as tf

    from tests.test_faults import file_size_limit
    from tf_transformer.atomic_files import WriteError, out_of_space, reporting_write_errors

    # A real full disk (a file-size limit: EFBIG), through TensorFlow's file system.
    full_disk = pytest.raises(WriteError, match="File too large; kept")
    with file_size_limit(1000), full_disk as full, reporting_write_errors("x", "kept"):
        tf.io.write_file(str(tmp_path / "big"), tf.constant("x" * 5000))
    assert out_of_space(full.value.__cause__)
    denied = tf.errors.PermissionDeniedError(None, None, "/x/y.tmp; Permission denied")
    refusal = pytest.raises(WriteError, match="Permission denied; kept")
    with refusal as refused, reporting_write_errors("x", "kept"):
        raise denied
    assert not out_of_space(refused.value.__cause__)
    # Not a write: out of memory, a bug, a missing file of a read.
    for error in [
        tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
        tf.errors.InvalidArgumentError(None, None, "Incompatible shapes"),
        tf.errors.UnknownError(None, None, "something else"),
    ]:
        with pytest.raises(type(error)), reporting_write_errors("x", "kept"):
            raise error
