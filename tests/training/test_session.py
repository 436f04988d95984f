"""What a training call records when it starts (`Session.open`): its mixed precision, resolved
once, with the reason, in config.json and as the run's first log line."""

import json
import shutil
from pathlib import Path

import pytest
import tensorflow as tf

from tf_transformer import training
from tf_transformer.config import DataConfig, get_preset, get_train_preset
from tf_transformer.data.sample import sample_pairs
from tf_transformer.run_dir import RunDir
from tf_transformer.training.session import Session, run_precision
from tf_transformer.training.step.mixed_precision import Precision, resolve_mixed_precision

pytestmark = pytest.mark.cost(20)  # seconds in make test (14 s measured alone)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "base_run_config.json"


def _train(run_dir: Path, corpus: Path, capsys, **options) -> list[str]:
    """A tiny run (or its resume) of 2 steps more; its stdout lines."""
    training.run(run_dir, DataConfig(dataset=str(corpus)), progress=True, **options)
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Four training pairs."""
    path = tmp_path / "four.tsv"
    path.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:4]))
    return path


@pytest.mark.slow
def test_auto_is_resolved_said_first_recorded_and_chosen_again_on_resume(tmp_path, corpus, capsys):
    # What "auto" chooses on this machine (bfloat16 on an AVX512_BF16 CPU or with a GPU,
    # float32 elsewhere): the run must say and record exactly that choice.
    expected = resolve_mixed_precision("auto")
    assert expected.auto and expected.reason.startswith("auto: ")
    config = get_train_preset("tiny").replace(mixed_precision="auto", max_steps=2, epochs=None)
    run_dir = tmp_path / "run"
    lines = _train(run_dir, corpus, capsys, model_config=get_preset("tiny"), train_config=config)
    assert lines[0] == expected.line()
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["train"]["mixed_precision"] == expected.value  # resolved, never "auto"
    assert recorded["mixed_precision"] == expected.record()
    assert RunDir(run_dir).train_config().mixed_precision == expected.value

    # As if the run had started on a machine that chose the other way: resumed here (with the
    # preset's "auto" given again), it chooses for this machine, says so and records it.
    other = Precision(None if expected.value else "bfloat16", "auto: (another machine)", auto=True)
    recorded["train"]["mixed_precision"] = other.value
    recorded["mixed_precision"] = other.record()
    (run_dir / "config.json").write_text(json.dumps(recorded))
    lines = _train(run_dir, corpus, capsys, train_config=config, train_changes={"max_steps": 4})
    assert lines[0] == expected.line()
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["train"]["mixed_precision"] == expected.value
    assert recorded["mixed_precision"] == expected.record()
    assert recorded["train"]["max_steps"] == 4


@pytest.mark.slow
def test_fit_says_and_records_it_too(tmp_path, corpus, capsys):
    expected = resolve_mixed_precision("auto")
    config = get_train_preset("tiny").replace(mixed_precision="auto", max_steps=2, epochs=None)
    run_dir = tmp_path / "run"
    lines = _train(
        run_dir, corpus, capsys, model_config=get_preset("tiny"), train_config=config, fit=True
    )
    assert lines[0] == expected.line()
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["train"]["mixed_precision"] == expected.value
    assert recorded["mixed_precision"] == expected.record()


def test_a_call_under_an_isa_limit_says_so_first_and_in_config_json(tmp_path, capsys, monkeypatch):
    # oneDNN reads ONEDNN_MAX_CPU_ISA once, at its first op: one runs first, under this
    # process's own setting, so the limit set below changes what "auto" sees, not the kernels
    # that later tests of this process run (under AVX2, a bfloat16 matmul aborts the process).
    tf.matmul(tf.ones((2, 2)), tf.ones((2, 2))).numpy()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    config = get_train_preset("tiny").replace(mixed_precision="auto")
    model = get_preset("tiny").replace(input_vocab_size=20, target_vocab_size=20)
    session = Session.open(RunDir(tmp_path / "run"), model, config, verbose=True)
    expected = resolve_mixed_precision("auto")
    if not tf.config.list_physical_devices("GPU"):
        assert expected.value is None
        assert "avx512_bf16 limited by ONEDNN_MAX_CPU_ISA=AVX2" in expected.reason or (
            "avx512_bf16 and amx-bf16 absent" in expected.reason  # a CPU without them
        )
    assert capsys.readouterr().out.splitlines() == [expected.line()]
    assert session.train_config.mixed_precision == expected.value
    assert session.precision == expected
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert recorded["mixed_precision"] == expected.record()
    assert recorded["train"] == config.replace(mixed_precision=expected.value).to_dict()


def test_a_set_value_is_kept_and_a_value_auto_chose_is_chosen_again(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run_precision(run, "float16") == Precision("float16", "as configured")
    run.root.mkdir()
    chosen = Precision("bfloat16", "auto: the CPU has avx512_bf16", auto=True)
    run.write_config({"model": {}, "mixed_precision": chosen.record()})
    assert run_precision(run, "bfloat16") == resolve_mixed_precision("auto")  # this machine's
    assert run_precision(run, None) == Precision(None, "as configured")  # not what auto chose
    run.write_config(
        {"model": {}, "mixed_precision": Precision("bfloat16", "as configured").record()}
    )
    assert run_precision(run, "bfloat16") == Precision("bfloat16", "as configured")


def test_a_run_written_before_auto_loads_with_its_bfloat16(tmp_path):
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    shutil.copy(FIXTURE, run.config_path)
    assert "mixed_precision" not in run.read_config()  # no record: written before
    assert run.train_config().mixed_precision == "bfloat16"
    assert run.model_config().d_model == 256
    assert run_precision(run, "bfloat16") == Precision("bfloat16", "as configured")
