"""Tests for `tf-transformer export`: next free version, refusal to overwrite, user errors."""

import hashlib
import shutil

import pytest
from tensorflow.core.protobuf import saved_model_pb2

from tests.export_helpers import tiny_export, tiny_run_dir
from tf_transformer import cli
from tf_transformer.backends.savedmodel.warmup import read_warmup_requests

pytestmark = [pytest.mark.slow, pytest.mark.cost(40)]


def _snapshot(directory):
    return {
        str(p.relative_to(directory)): (p.stat().st_mtime_ns, hashlib.sha1(p.read_bytes()).digest())
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A model base path that already holds version 1: a copy of the shared export, which
    other tests read as it is (its base path has version 1 only)."""
    base = tmp_path_factory.mktemp("export") / "tiny"
    shutil.copytree(tiny_export()[0], base / "1")
    return base


def test_export_writes_the_next_version(base_dir, capsys):
    code = cli.main(
        ["export", str(tiny_run_dir().root), "--out", str(base_dir), "--beam-size", "2"]
        + ["--max-source-tokens", "8", "--max-new-tokens", "8"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert f"Exported savedmodel version 2 to {base_dir / '2'}" in out
    proto = saved_model_pb2.SavedModel.FromString((base_dir / "2" / "saved_model.pb").read_bytes())
    (meta_graph,) = proto.meta_graphs
    assert list(meta_graph.meta_info_def.tags) == ["serve"]
    signatures = set(meta_graph.signature_def) - {"__saved_model_init_op"}
    assert signatures == {"serving_default", "greedy", "attention", "alternatives"}
    assert not [f for f in meta_graph.graph_def.library.function if f.attr["_XlaMustCompile"].b]
    assert len(read_warmup_requests(base_dir / "2")) == 3  # graph mode: one per signature
    assert "--xla_cpu_compilation_enabled" not in out
    assert sorted(p.name for p in base_dir.iterdir()) == ["1", "2"]  # no temporary left


def test_jit_compile_export(tmp_path, capsys):
    base = tmp_path / "tiny"
    arguments = [
        "--jit-compile",
        "--warmup-batch-sizes",
        "1,4",
        "--max-source-tokens",
        "20",
        "--max-new-tokens",
        "20",
    ]
    code = cli.main(["export", str(tiny_run_dir().root), "--out", str(base), *arguments])
    assert code == 0
    out = capsys.readouterr().out
    assert "decoding compiled with XLA" in out
    assert f"{base / '1' / 'assets.extra' / 'tf_serving_warmup_requests'}" in out
    assert "--xla_cpu_compilation_enabled=true" in out
    proto = saved_model_pb2.SavedModel.FromString((base / "1" / "saved_model.pb").read_bytes())
    (meta_graph,) = proto.meta_graphs
    assert [f for f in meta_graph.graph_def.library.function if f.attr["_XlaMustCompile"].b]
    requests = read_warmup_requests(base / "1")
    # serving_default and greedy x batches 1 and 4 x source buckets 16 and 20, attention x 2.
    assert len(requests) == 2 * 2 * 2 + 2
    assert sorted({len(r.inputs["sentences"]) for r in requests if "sentences" in r.inputs}) == [
        1,
        4,
    ]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--warmup-batch-sizes", "1,2"], "--warmup-batch-sizes needs --jit-compile."),
        (["--jit-compile", "--warmup-batch-sizes", "1,3"], "must be powers of two, got '1,3'"),
        (["--jit-compile", "--warmup-batch-sizes", "one"], "must be comma-separated integers"),
    ],
)
def test_bad_warmup_batch_sizes(tmp_path, capsys, arguments, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        code = cli.main(["export", str(tiny_run_dir().root), "--out", str(out), *arguments])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error
    assert not out.exists()


def test_existing_version_is_refused_and_untouched(base_dir, capsys):
    before = _snapshot(base_dir / "1")
    code = cli.main(["export", str(tiny_run_dir().root), "--out", str(base_dir), "--version", "1"])
    assert code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "exists; versions are never overwritten" in error
    assert _snapshot(base_dir / "1") == before
    assert not [p for p in base_dir.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("arguments", [["--version", "0"], ["--beam-size", "0"]])
def test_bad_options_are_user_errors(base_dir, capsys, arguments):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tiny_run_dir().root), "--out", str(base_dir), *arguments])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "must be a positive integer, got 0" in error


def test_not_a_run_directory(tmp_path, capsys):
    code = cli.main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "not a run directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
