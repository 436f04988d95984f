"""Faults a run survives, made for real on a tiny run: torn checkpoints (truncated, emptied),
a full disk (a file-size limit, `RLIMIT_FSIZE`), two trainers on one run.

Every CLI answer is one line on stderr (a warning that names what was passed over, or an error
with exit 2), never a traceback; what was there before stays whole and loadable.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import tensorflow as tf

from tf_transformer import cli
from tf_transformer.atomic_files import WriteError
from tf_transformer.checkpoint_files import (
    TornCheckpointError,
    checkpoint_candidates,
    checkpoint_number,
    checkpoint_problem,
    is_torn_error,
)
from tf_transformer.errors import TransformerWarning
from tf_transformer.run_dir import RunDir
from tf_transformer.training.start.lock import RunLock, RunLockedError

pytestmark = [pytest.mark.cost(220), pytest.mark.processes]  # cost: seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny run trained by the CLI: checkpoints/ckpt-2 and ckpt-4, averaged/ (of both), and
    best/ (a copy of averaged/; the folders' state files hold relative paths)."""
    from tf_transformer.data.sample import sample_pairs

    root = tmp_path_factory.mktemp("faults")
    corpus = root / "four.tsv"
    corpus.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:4]))
    run_dir = root / "run"
    flags = ["--preset", "tiny", "--max-steps", "4", "--checkpoint-every", "2"]
    code = cli.main(
        ["train", "--dataset", str(corpus), *flags, "--average-last", "2"]
        + ["--run-dir", str(run_dir), "--quiet"]
    )
    assert code == 0
    run = RunDir(run_dir)
    shutil.copytree(run.averaged_path, run.best_path)
    return run_dir


@pytest.fixture
def run(trained, tmp_path) -> RunDir:
    """A copy of the trained run, to damage."""
    return RunDir(shutil.copytree(trained, tmp_path / "run"))


def _cut(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _data(prefix) -> Path:
    return Path(f"{prefix}.data-00000-of-00001")


def _index(prefix) -> Path:
    return Path(f"{prefix}.index")


DAMAGE = {
    "data cut to 1000 bytes": lambda p: _cut(_data(p), 1000),
    "data cut by one byte": lambda p: _cut(_data(p), _data(p).stat().st_size - 1),
    "data empty": lambda p: _cut(_data(p), 0),
    "index empty": lambda p: _cut(_index(p), 0),
    "index cut in half": lambda p: _cut(_index(p), _index(p).stat().st_size // 2),
    "data missing": lambda p: _data(p).unlink(),
}


def _cli(capsys, *args) -> tuple[int, str, list[str]]:
    """`(exit code, stdout, stderr lines)` of the CLI run in process."""
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def _child_obeying_modes(*args) -> tuple[int, list[str]]:
    """`(exit code, the CLI's own stderr lines)` of the CLI in a child process to which file
    modes apply: a child of root loses the capabilities that let it read and write any file
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH)."""

    def limit():
        if os.getuid() == 0:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
                if prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, before exec
                    raise OSError(ctypes.get_errno(), "cannot drop a capability")

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "tf_transformer.cli", *map(str, args)]
    done = subprocess.run(
        command, preexec_fn=limit, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, [line for line in done.stderr.splitlines() if "tf-transformer" in line]


@contextlib.contextmanager
def file_size_limit(size: int):
    """Files of this process may not grow past `size` bytes while inside (a write past it fails
    with EFBIG: Python ignores SIGXFSZ); the limit is lifted on the way out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _cli_on_a_full_disk(capsys, file_size: int, *args) -> tuple[int, list[str]]:
    """`(exit code, the CLI's own stderr lines)` of the CLI run in process while its files may
    not grow past `file_size` bytes, as on a full disk."""
    with file_size_limit(file_size):
        code, _, err = _cli(capsys, *args)
    assert not any("Traceback" in line for line in err), err
    return code, [line for line in err if "tf-transformer" in line]


# Torn checkpoints.


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_torn_latest_checkpoint_is_passed_over_for_the_one_before(run, damage):
    torn = run.checkpoints_path / "ckpt-4"
    assert checkpoint_problem(torn) is None
    DAMAGE[damage](torn)
    assert checkpoint_problem(torn) is not None
    assert run.latest_checkpoint() == str(torn)  # the state file still names it
    with pytest.warns(TransformerWarning, match=f"{torn} is torn") as caught:
        assert run.checkpoint("latest") == ("latest", str(run.checkpoints_path / "ckpt-2"))
    assert len(caught) == 1 and str(run.checkpoints_path / "ckpt-2") in str(caught[0].message)


def test_translate_and_resume_use_the_newest_whole_checkpoint(run, capsys, tmp_path):
    torn, whole = run.checkpoints_path / "ckpt-4", run.checkpoints_path / "ckpt-2"
    _cut(_data(torn), 1000)  # the case
    decode = ["--beam-size", "1", "--max-source-tokens", "4", "--max-new-tokens", "4"]
    code, out, err = _cli(
        capsys, "translate", run.root, "o gato .", "--checkpoint", "latest", *decode
    )
    assert code == 0 and len(out.splitlines()) == 1
    assert err[0].startswith(f"tf-transformer translate: warning: {torn} is torn (")
    assert err[0].endswith(f"; using the latest checkpoint {whole}")
    assert err[1:] == [f"latest checkpoint: {whole}"]

    # A second name for the torn index holds its inode, so a new file cannot reuse the number.
    torn_index = tmp_path / "torn.index"
    os.link(_index(torn), torn_index)
    code, out, err = _cli(
        capsys, "train", "--resume", "--run-dir", run.root, "--max-steps", "6", "--quiet"
    )
    assert code == 0 and "trained to step 6" in out
    assert len(err) == 1 and err[0].startswith(f"tf-transformer train: warning: {torn} is torn")
    assert err[0].endswith(f"resuming from {whole}, the newest whole one")
    # Resumed from step 2: step 4 was trained again and saved whole in place of the torn one,
    # whose files were removed first (its index not rewritten in place: a new file).
    assert checkpoint_problem(torn) is None
    assert not os.path.samefile(_index(torn), torn_index)
    assert (
        tf.train.load_checkpoint(str(torn)).get_tensor("state/step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    )


def test_no_whole_checkpoint_is_one_error_line(run, capsys):
    for prefix in ("ckpt-2", "ckpt-4"):
        _cut(_data(run.checkpoints_path / prefix), 0)
    shutil.rmtree(run.best_path)
    _cut(_index(run.averaged_path / "ckpt-1"), 0)
    code, _, err = _cli(capsys, "translate", run.root, "o gato .")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        f"tf-transformer translate: error: no whole checkpoint in {run.checkpoints_path}"
    )
    code, _, err = _cli(capsys, "evaluate", run.root, "--limit", "1", "--quiet")
    assert code == 2 and len(err) == 1 and "no whole checkpoint" in err[0]
    code, _, err = _cli(capsys, "train", "--resume", "--run-dir", run.root, "--max-steps", "6")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        f"tf-transformer train: error: no whole checkpoint in {run.checkpoints_path}"
    )
    assert err[0].endswith("Start over with --overwrite.")


def test_a_torn_fit_backup_is_passed_over_for_the_newest_whole_checkpoint(tmp_path, capsys):
    from tf_transformer.data.sample import sample_pairs

    run = RunDir(tmp_path / "fit")
    backup = run.root / "fit" / "backup"
    # 3,000 pairs: an epoch of ~30 steps (`sample`'s 20,000 make ~211), long enough for the
    # kill below to land in the second one.
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:3000]))
    train = ["train", "--preset", "tiny", "--dataset", str(corpus), "--fit", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    killed = subprocess.Popen(
        [sys.executable, "-m", "tf_transformer.cli", *train, "--run-dir", str(run.root)]
        + ["--epochs", "1000", "--max-steps", "100000", "--checkpoint-every", "100000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # Killed in its second epoch: Keras deletes its backup only when `fit` ends, and checkpoints
    # are saved only at each epoch's end, after the backup.
    try:
        deadline = time.monotonic() + 240
        while not (run.checkpoints_path / "checkpoint").is_file():  # written after the backup
            assert killed.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    (whole,) = checkpoint_candidates(run.checkpoints_path)  # the first epoch's end
    _cut(backup / "latest.weights.h5", 1000)
    step = checkpoint_number(whole)
    resume = ["train", "--resume", "--fit", "--run-dir", run.root, "--quiet"]

    # Without the checkpoint nothing whole is left: one error line, the backup kept.
    shutil.move(run.checkpoints_path, tmp_path / "aside")
    code, _, err = _cli(capsys, *resume, "--max-steps", step + 2)
    assert code == 2 and err[0].startswith("tf-transformer train: warning: taking over the lock")
    assert len(err) == 2 and err[1].startswith(
        f"tf-transformer train: error: nothing whole to resume from: the backup {backup} is torn "
        "(Unable to synchronously open file (truncated file: eof = 1000"
    )
    assert err[1].endswith("and the run holds no checkpoint. Start over with --overwrite.")
    assert (backup / "latest.weights.h5").stat().st_size == 1000

    shutil.move(tmp_path / "aside", run.checkpoints_path)
    code, out, err = _cli(capsys, *resume, "--max-steps", step + 2)
    assert code == 0 and f"fit to step {step + 2} (epoch 2)" in out
    assert len(err) == 1 and err[0].startswith(
        f"tf-transformer train: warning: the backup {backup} is torn (Unable to synchronously "
        "open file (truncated file: eof = 1000, "
    )
    assert err[0].endswith(f")); resuming from {whole}, the newest whole checkpoint")
    assert not backup.exists()


def test_best_then_averaged_then_latest_each_passed_over_when_torn_or_missing(run):
    best, averaged = run.best_path / "ckpt-1", run.averaged_path / "ckpt-1"
    latest = str(run.checkpoints_path / "ckpt-4")
    assert run.checkpoint() == ("best", str(best))
    _cut(_data(best), 1000)
    with pytest.warns(TransformerWarning, match=f"{best} is torn .*; using the averaged"):
        assert run.checkpoint() == ("averaged", str(averaged))
    with pytest.warns(TransformerWarning, match=f"{best} is torn .*; using the averaged"):
        assert run.checkpoint("best") == ("averaged", str(averaged))
    shutil.rmtree(run.best_path)
    assert run.checkpoint() == ("averaged", str(averaged))  # no best/: nothing to say
    message = f"there is no best checkpoint in {run.best_path}; using the averaged"
    with pytest.warns(TransformerWarning, match=message):
        assert run.checkpoint("best") == ("averaged", str(averaged))
    _cut(_index(averaged), 0)
    with pytest.warns(
        TransformerWarning, match=f"{averaged} is torn .*; using the latest checkpoint {latest}"
    ):
        assert run.checkpoint("averaged") == ("latest", latest)


def test_evaluate_says_which_checkpoint_replaced_a_torn_average(run, capsys):
    averaged = run.averaged_path / "ckpt-1"
    _cut(_data(averaged), 1000)
    args = ["--checkpoint", "averaged", "--limit", "1", "--beam-size", "1"]
    args += ["--max-source-tokens", "4", "--max-new-tokens", "4"]
    code, out, err = _cli(capsys, "evaluate", run.root, *args, "--quiet")
    assert code == 0 and "BLEU" in out
    latest = run.checkpoints_path / "ckpt-4"
    assert err == [
        (
            f"tf-transformer evaluate: warning: {averaged} is torn (its data is unreadable: Read "
            f"less bytes than requested); using the latest checkpoint {latest}"
        )
    ]


def test_a_given_torn_checkpoint_is_an_error(run):
    torn = str(run.checkpoints_path / "ckpt-4")
    _cut(_index(torn), 0)
    with pytest.raises(
        TornCheckpointError, match=f"cannot read the checkpoint {torn}: its index file"
    ):
        run.checkpoint(torn)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_unreadable_newest_checkpoint_stops_resume_and_nothing_is_overwritten(run):
    """Permission denied is not torn: resume stops with its own line instead of going back to
    ckpt-2 (and saving over ckpt-4 later)."""
    newest = run.checkpoints_path / "ckpt-4"
    before = _files(run.checkpoints_path)
    os.chmod(_data(newest), 0)
    try:
        code, err = _child_obeying_modes(
            "train", "--resume", "--run-dir", run.root, "--max-steps", "8",
            "--checkpoint-every", "1", "--quiet",
        )  # fmt: skip
    finally:
        os.chmod(_data(newest), 0o644)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"tf-transformer train: error: cannot read the checkpoint {newest}: ")
    assert "Permission denied; no older checkpoint is used in its place" in err[0], err
    assert _files(run.checkpoints_path) == before


def _raised(error_fn) -> BaseException:
    try:
        error_fn()
    except Exception as error:  # noqa: BLE001 - the error to classify
        return error
    raise AssertionError("no error")


def test_torn_is_told_by_the_type_and_the_reader_not_by_words(tmp_path):
    prefix = tf.train.Checkpoint(v=tf.Variable(tf.ones(1000))).write(str(tmp_path / "ckpt-1"))
    reader = tf.train.load_checkpoint(prefix)  # the index, read whole
    key = next(iter(reader.get_variable_to_dtype_map()))
    _cut(_data(prefix), 100)
    short = _raised(lambda: reader.get_tensor(key))  # the reader's short read
    assert isinstance(short, IndexError) and is_torn_error(short)
    _cut(_index(prefix), _index(prefix).stat().st_size // 2)
    bad_index = _raised(lambda: tf.train.load_checkpoint(prefix))  # "not an sstable"
    assert isinstance(bad_index, tf.errors.OpError) and is_torn_error(bad_index)
    assert is_torn_error(tf.errors.DataLossError(None, None, "a checksum"))
    # The same words from elsewhere are no torn checkpoint: a bug of ours, another op's error.
    ours = _raised(lambda: key.split("/")[99])
    assert isinstance(ours, IndexError) and not is_torn_error(ours)
    assert not is_torn_error(_raised(lambda: _raise(IndexError("Read less bytes than requested"))))
    for words in ("Checksum does not match", "corrupted", "truncated", "not an sstable"):
        unknown = tf.errors.OpError(None, None, words, tf.errors.UNKNOWN)
        assert not is_torn_error(_raised(lambda error=unknown: _raise(error)))


def _raise(error: BaseException):
    raise error


def test_an_error_that_is_no_torn_read_keeps_its_type_and_traceback(tmp_path):
    """Only a torn read of the files is passed over (or a reader's error stopped in one line):
    an `IndexError` or `OpError` from elsewhere in the restore propagates as itself."""
    from tf_transformer.training.checkpoints import restore_newest

    folder = tmp_path / "ckpts"
    tf.train.Checkpoint(v=tf.Variable(tf.ones(10))).save(str(folder / "ckpt"))

    class Restores:
        def __init__(self, error):
            self.error = error

        def restore(self, path):
            raise self.error

    for error in (
        IndexError("Read less bytes than requested"),  # the reader's words, not the reader
        tf.errors.InvalidArgumentError(None, None, "truncated: not a read of the files"),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransformerWarning)  # nothing passed over
            with pytest.raises(type(error)) as info:
                restore_newest(Restores(error), folder)
        assert info.value is error
        assert info.traceback[-1].name == "restore"  # where it was raised, kept


# A full disk: writes past a file-size limit fail.


def test_a_failed_checkpoint_save_keeps_the_previous_one(run, capsys):
    state = (run.checkpoints_path / "checkpoint").read_text()
    before = sorted(p.name for p in run.checkpoints_path.iterdir())
    size = _data(run.checkpoints_path / "ckpt-4").stat().st_size
    code, err = _cli_on_a_full_disk(
        capsys, size // 2, "train", "--resume", "--run-dir", run.root, "--max-steps", "8",
        "--checkpoint-every", "1", "--quiet",
    )  # fmt: skip
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        f"tf-transformer train: error: cannot write the checkpoint {run.checkpoints_path}/ckpt-5: "
        f"File too large; the latest is still {run.checkpoints_path}/ckpt-4. Free some disk "
        "space, then continue with --resume."
    ), err
    assert (run.checkpoints_path / "checkpoint").read_text() == state
    assert sorted(p.name for p in run.checkpoints_path.iterdir()) == before  # no ckpt-4_temp/
    caps = ["--max-source-tokens", "4", "--max-new-tokens", "4"]
    code, out, _ = _cli(capsys, "translate", run.root, "o gato .", "--checkpoint", "latest", *caps)
    assert code == 0 and out.strip()


def test_fit_on_a_full_disk_is_one_line_and_leaves_its_files_as_they_were(tmp_path, capsys):
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.training.fit.backup import BackupAndRestore

    corpus = tmp_path / "four.tsv"
    corpus.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:4]))
    run = RunDir(tmp_path / "run")
    fit = ["train", "--fit", "--run-dir", run.root, "--quiet"]
    code, _, _ = _cli(capsys, *fit, "--dataset", corpus, "--preset", "tiny", "--epochs", "1")
    assert code == 0
    model_file = run.root / "fit" / "model.keras"
    # The backup a killed fit leaves (Keras removes it when fit ends), written by its callback.
    backup = BackupAndRestore(str(run.root / "fit" / "backup"), restore=lambda: None)
    backup.set_model(tf.keras.models.load_model(model_file))
    backup._current_epoch = 1
    backup._save_model()
    before = {**_files(run.root / "fit"), **_files(run.checkpoints_path)}

    # Epoch 2's end: model.keras is written first, then the backup, then the checkpoint.
    size = model_file.stat().st_size
    code, err = _cli_on_a_full_disk(capsys, size // 2, *fit, "--resume", "--epochs", "2")
    line = f"tf-transformer train: error: cannot write {model_file}: File too large; model.keras"
    assert code == 2 and err == [f"{line} is as it was"], err
    assert {**_files(run.root / "fit"), **_files(run.checkpoints_path)} == before


def test_failed_config_and_tokenizers_writes_keep_the_old_files(run):
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.text.tokenizers import build_tokenizers

    config = run.config_path.read_bytes()
    tokenizers = {p: p.read_bytes() for p in run.tokenizers_path.rglob("*") if p.is_file()}
    pairs = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*sample_pairs("train")[:4]))))
    new = build_tokenizers(pairs, vocab_size=100)
    with file_size_limit(1000), pytest.raises(WriteError) as error:
        run.write_config({**run.read_config(), "note": "x" * 1000})
    assert (
        str(error.value)
        == f"cannot write {run.config_path}: File too large; config.json is as it was"
    )
    with file_size_limit(20_000), pytest.raises(WriteError) as error:
        new.save(run.tokenizers_path)
    assert (
        str(error.value)
        == f"cannot write {run.tokenizers_path}: File too large; {run.tokenizers_path} is as it was"
    )
    assert run.config_path.read_bytes() == config
    assert {p: p.read_bytes() for p in run.tokenizers_path.rglob("*") if p.is_file()} == tokenizers
    assert sorted(p.name for p in run.root.iterdir()) == [
        "checkpoints",
        "config.json",
        "logs",
        "tokenizers",
    ]


def test_a_failed_export_leaves_no_version_and_the_earlier_one_loads(run, capsys, tmp_path):
    base = tmp_path / "saved" / "t"
    earlier = tf.Module()
    earlier.f = tf.function(lambda: tf.constant(1), input_signature=[])
    tf.saved_model.save(earlier, str(base / "1"))
    torn = run.checkpoints_path / "ckpt-4"
    _cut(_index(torn), 0)
    with file_size_limit(100_000):
        code, _, err = _cli(capsys, "export", run.root, "--checkpoint", "latest", "--out", base)
    assert code == 2 and err == [
        (
            f"tf-transformer export: warning: {torn} is torn (its index file ckpt-4.index is "
            f"empty); using the latest checkpoint {run.checkpoints_path / 'ckpt-2'}"
        ),
        (
            f"tf-transformer export: error: cannot write {base / '2'}: File too large; nothing "
            f"was left at {base / '2'}"
        ),
    ]
    assert [p.name for p in base.iterdir()] == ["1"]  # no version 2, no temporary directory
    assert int(tf.saved_model.load(str(base / "1")).f()) == 1


def test_a_failed_ctranslate2_export_is_one_line_and_leaves_nothing(run, capsys, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    export = ["export", run.root, "--format", "ctranslate2", "--out", out]
    with file_size_limit(100_000):  # model.bin of the tiny model is larger
        code, _, err = _cli(capsys, *export)
    assert code == 2 and err == [
        f"tf-transformer export: error: cannot write {out}: File too large; nothing was left at {out}"
    ]
    assert list(tmp_path.iterdir()) == [tmp_path / "run"]  # no ct2/, no temporary directory
    code, _, _ = _cli(capsys, *export)  # with room, the same export is whole
    assert code == 0 and ctranslate2.Translator(str(out), device="cpu")


# Two trainers on one run.


def _lock_holder(run: RunDir) -> int | None:
    try:
        return json.loads((run.root / "train.lock").read_text())["pid"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def test_a_second_trainer_is_refused_and_a_killed_ones_lock_taken_over(run, capsys):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "tf_transformer.cli", "train", "--resume"]
    first = subprocess.Popen(
        [*command, "--run-dir", str(run.root), "--max-steps", "100000", "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while _lock_holder(run) != first.pid:
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        code, _, err = _cli(capsys, "train", "--resume", "--run-dir", run.root, "--max-steps", "6")
        assert code == 2 and len(err) == 1
        assert err[0].startswith(
            f"tf-transformer train: error: {run.root} is being trained by process {first.pid} on "
        )
        code, _, err = _cli(
            capsys, "train", "--overwrite", "--run-dir", run.root, "--preset", "tiny"
        )
        assert code == 2 and f"process {first.pid}" in err[0]
        assert run.config_path.is_file()  # --overwrite was refused before it deleted anything
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert _lock_holder(run) == first.pid  # a killed process cannot remove its lock file
    message = f"taking over the lock {run.root / 'train.lock'} of process {first.pid} on "
    with pytest.warns(TransformerWarning, match=message), RunLock(run.root):
        assert _lock_holder(run) == os.getpid()
    assert not (run.root / "train.lock").exists()  # released: removed


def test_a_lock_is_refused_while_held_and_removes_a_run_dir_it_made(tmp_path):
    refused = pytest.raises(RunLockedError, match=f"being trained by process {os.getpid()} on ")
    with RunLock(tmp_path / "new"), refused:
        RunLock(tmp_path / "new").acquire()  # another open file description: refused
    assert not (tmp_path / "new").exists()


# Saving.


def test_the_state_file_names_a_checkpoint_only_once_its_files_are_whole(tmp_path):
    from tf_transformer.training.checkpoints import CheckpointManager

    folder = tmp_path / "ckpts"
    manager = CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.ones(1000))), str(folder), 3)
    first = manager.save(checkpoint_number=1)
    seen = []

    def when_written(prefix):  # runs where the fsync runs: before the state file is written
        seen.append((tf.train.latest_checkpoint(str(folder)), checkpoint_problem(prefix)))

    options = tf.train.CheckpointOptions(experimental_write_callbacks=[when_written])
    second = manager.save(checkpoint_number=2, options=options)
    assert seen == [(first, None)]
    assert tf.train.latest_checkpoint(str(folder)) == second


def test_checkpoint_files_are_fsynced_before_the_state_file_names_them(tmp_path, monkeypatch):
    from tf_transformer.training.checkpoints import CheckpointManager

    folder = tmp_path / "ckpts"
    manager = CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.ones(1000))), str(folder), 3)
    first = manager.save(checkpoint_number=1)
    fsync, synced = os.fsync, []

    def recording_fsync(fd):  # the real fsync, recording what it synced and what the state named
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), tf.train.latest_checkpoint(str(folder))))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    second = manager.save(checkpoint_number=2)
    monkeypatch.undo()
    assert synced == [
        (f"{second}.index", first),
        (f"{second}.data-00000-of-00001", first),
        (str(folder), first),  # the folder, so that the renames are on disk too
    ]
    assert tf.train.latest_checkpoint(str(folder)) == second  # named after the last fsync


# Readers beside a trainer.


def test_a_checkpoint_the_state_file_does_not_name_yet_is_no_candidate(tmp_path):
    from tf_transformer.checkpoint_files import newest_intact
    from tf_transformer.training.checkpoints import CheckpointManager

    folder = tmp_path / "ckpts"
    manager = CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.ones(1000))), str(folder), 3)
    first = manager.save(checkpoint_number=1)
    # ckpt-2 as a trainer leaves it for a moment: its index there, its data still short.
    shutil.copy(_index(first), folder / "ckpt-2.index")
    shutil.copy(_data(first), _data(folder / "ckpt-2"))
    _cut(_data(folder / "ckpt-2"), 100)
    notes = []
    assert checkpoint_candidates(folder) == [first]
    assert newest_intact(folder, notes) == first and notes == []  # no false "torn" line
    (folder / "checkpoint").unlink()  # without a state file, the files decide
    assert checkpoint_candidates(folder) == [str(folder / "ckpt-2"), first]


def test_a_replaced_best_or_average_stays_readable_until_the_next_replacement(tmp_path):
    from tf_transformer.training.checkpoints import save_model_checkpoint

    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    model.build((None, 3))
    folder = tmp_path / "best"
    found = save_model_checkpoint(model, folder, 1)  # what a reader found just before ...
    newer = save_model_checkpoint(model, folder, 2)  # ... this replacement
    assert tf.train.latest_checkpoint(str(folder)) == newer
    assert checkpoint_problem(found) is None  # still whole: the reader can restore it
    save_model_checkpoint(model, folder, 3)
    assert checkpoint_candidates(folder) == [str(folder / "ckpt-3"), newer]
    # Other weights of step 3 (the averaged ones after the training ones): a new number.
    model.set_weights([w + 1 for w in model.get_weights()])
    assert save_model_checkpoint(model, folder, 3) == str(folder / "ckpt-4")


def test_no_checkpoint_number_is_saved_twice(run, monkeypatch):
    """A run resumed at the end of an epoch (ckpt-4), saving every step of one-step epochs:
    each step's save is followed by its epoch-end save, the resumed run's first save is step 4
    again. Each number is written once (one fsync of its index, see `sync_checkpoint_files`),
    and ckpt-4's files are left as they were."""
    ckpt4 = run.checkpoints_path / "ckpt-4"
    files = [_index(ckpt4), _data(ckpt4)]
    before = [(p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in files]
    fsync, indexes = os.fsync, []

    def recording_fsync(fd):  # the real fsync, recording which index files it synced
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if path.parent == run.checkpoints_path and path.suffix == ".index":
            indexes.append(path.name)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    code = cli.main(
        ["train", "--resume", "--run-dir", str(run.root), "--max-steps", "6"]
        + ["--checkpoint-every", "1", "--quiet"]
    )
    monkeypatch.undo()
    assert code == 0
    assert indexes == ["ckpt-5.index", "ckpt-6.index"]
    assert [(p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in files] == before


def test_a_reader_beside_a_training_run_sees_no_torn_or_missing_checkpoint(run):
    """`train` saves a checkpoint every step (each tiny epoch is one step: the epoch-end saves)
    while this process reads the latest in a loop, as `translate --checkpoint latest` does
    (`RunDir.checkpoint`, then every tensor): every read succeeds, with no warning. Each step's
    save is followed by its epoch's end, which saves nothing (`test_no_checkpoint_number_is_
    saved_twice`): an index rewritten in place would be read torn here now and then."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    trainer = subprocess.Popen(
        [sys.executable, "-m", "tf_transformer.cli", "train", "--resume", "--run-dir", run.root]
        + ["--max-steps", "10", "--checkpoint-every", "1", "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    loaded = set()
    # Until the first save the state file names ckpt-4 as now: the reader waits (without
    # spending a core while the trainer starts), then reads as fast as it can.
    state = run.checkpoints_path / "checkpoint"
    before = state.read_bytes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransformerWarning)  # a "torn" line fails the test
            while trainer.poll() is None and state.read_bytes() == before:
                time.sleep(0.05)
            while trainer.poll() is None:
                _, path = run.checkpoint("latest")
                reader = tf.train.load_checkpoint(path)
                for name in reader.get_variable_to_dtype_map():
                    reader.get_tensor(name)
                loaded.add(path)
    finally:
        trainer.kill()
        _, err = trainer.communicate()
    assert trainer.returncode == 0, err
    assert len(loaded) > 2, loaded  # the reader really read while checkpoints were replaced
