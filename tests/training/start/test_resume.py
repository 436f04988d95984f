"""What a resumed run may change (`training.start.resume`), the same from Python and the CLI."""

import shutil
from pathlib import Path

import pytest

from tf_transformer import cli, training
from tf_transformer.config import get_preset, get_train_preset
from tf_transformer.training.start.resume import RESUMABLE, apply_train_changes, resumed_configs

MODEL = get_preset("tiny").replace(input_vocab_size=50, target_vocab_size=60)
TRAIN = get_train_preset("tiny")  # epochs=1


def test_limits_may_change_and_max_steps_alone_lifts_the_epochs():
    _, resumed = resumed_configs(MODEL, TRAIN, train_changes={"max_steps": 40, "patience": None})
    assert (resumed.max_steps, resumed.epochs) == (40, None)
    _, resumed = resumed_configs(MODEL, TRAIN, train_changes={"max_steps": 40, "epochs": 3})
    assert (resumed.max_steps, resumed.epochs) == (40, 3)
    _, resumed = resumed_configs(
        MODEL, TRAIN, train_config=TRAIN.replace(average_last=2, eval_every=5)
    )
    assert resumed == TRAIN.replace(average_last=2, eval_every=5)
    assert apply_train_changes(TRAIN, None) == TRAIN


def test_what_the_run_learns_is_kept():
    message = r"keeps its training settings; asked to change label_smoothing 0\.0 -> 0\.3\."
    with pytest.raises(ValueError, match=message):
        resumed_configs(MODEL, TRAIN, train_changes={"label_smoothing": 0.3})
    with pytest.raises(ValueError, match="token_budget 1024 -> 512"):
        resumed_configs(MODEL, TRAIN, train_config=TRAIN.replace(token_budget=512, max_steps=9))
    assert "label_smoothing" not in RESUMABLE and "max_steps" in RESUMABLE


def test_the_model_is_kept_its_vocabulary_sizes_are_filled_in():
    model, _ = resumed_configs(
        MODEL, TRAIN, model_config=get_preset("tiny")
    )  # placeholder vocab sizes
    assert model == MODEL
    with pytest.raises(ValueError, match="keeps its model; asked to change d_model 32 -> 64"):
        resumed_configs(MODEL, TRAIN, model_config=MODEL.replace(d_model=64))


@pytest.fixture
def stored_run(tmp_path):
    """A run directory with only its config.json (a refused resume reads nothing else)."""
    fixture = Path(__file__).parents[2] / "fixtures" / "base_run_config.json"
    (tmp_path / "run").mkdir()
    shutil.copy(fixture, tmp_path / "run" / "config.json")
    return tmp_path / "run"


def test_python_and_cli_refuse_the_same_change(stored_run, capsys):
    before = (stored_run / "config.json").read_bytes()
    with pytest.raises(ValueError, match="label_smoothing 0.2 -> 0.1"):
        training.run(stored_run, train_changes={"label_smoothing": 0.1}, progress=False)
    code = cli.main(["train", "--resume", "--run-dir", str(stored_run), "--label-smoothing", "0.1"])
    err = capsys.readouterr().err
    assert code == 2 and "label_smoothing 0.2 -> 0.1" in err and err.count("\n") == 1
    assert cli.main(["train", "--resume", "--run-dir", str(stored_run), "--d-model", "64"]) == 2
    assert "keeps its model; asked to change d_model 256 -> 64" in capsys.readouterr().err
    assert [p.name for p in stored_run.iterdir()] == ["config.json"]
    assert (stored_run / "config.json").read_bytes() == before


def test_auto_given_to_a_resume_is_the_runs_own_choice():
    # config.json records what "auto" chose when the run started; giving the preset's "auto"
    # again (a notebook passing the same TrainConfig) resumes with that choice, not a refusal.
    for stored in (TRAIN.replace(mixed_precision="bfloat16"), TRAIN):
        given = stored.replace(mixed_precision="auto")
        _, resumed = resumed_configs(MODEL, stored, train_config=given)
        assert resumed == stored
        _, resumed = resumed_configs(MODEL, stored, train_changes={"mixed_precision": "auto"})
        assert resumed == stored
    with pytest.raises(ValueError, match="mixed_precision 'bfloat16' -> 'float16'"):
        resumed_configs(
            MODEL,
            TRAIN.replace(mixed_precision="bfloat16"),
            train_changes={"mixed_precision": "float16"},
        )


def test_an_old_runs_bfloat16_resumes_with_the_presets_auto(stored_run):
    from tf_transformer.run_dir import RunDir

    run = RunDir(stored_run)
    given = get_train_preset("small-data").replace(max_minutes=27.0)
    assert given.mixed_precision == "auto" and run.train_config().mixed_precision == "bfloat16"
    _, resumed = resumed_configs(run.model_config(), run.train_config(), train_config=given)
    assert resumed.mixed_precision == "bfloat16"
