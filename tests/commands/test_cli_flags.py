"""The flags made from the config fields: one per field, the preset's defaults in the help."""

import argparse
import dataclasses
import shutil
from pathlib import Path

import pytest

from tf_transformer import cli
from tf_transformer.commands import train
from tf_transformer.config import (
    DataConfig,
    DecodeConfig,
    ModelConfig,
    TrainConfig,
    base,
    get_train_preset,
)
from tf_transformer.run_dir import RunDir

BASE_CONFIG = Path(__file__).parents[1] / "fixtures" / "base_run_config.json"


def _subparser(name: str) -> argparse.ArgumentParser:
    return cli.build_parser()._subparsers._group_actions[0].choices[name]


def _visible_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """`{dest: first option string}` of the flags the help lists."""
    return {
        action.dest: action.option_strings[0]
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS and action.dest != "help"
    }


def _fields(*classes) -> set[str]:
    return {field.name for cls in classes for field in dataclasses.fields(cls)}


def test_every_train_field_has_a_flag_and_every_flag_a_field():
    flags = _visible_flags(_subparser("train"))
    fields = _fields(ModelConfig, TrainConfig, DataConfig) - set(train.SET_BY_TRAINING)
    assert set(flags) - set(train.RUN_FLAGS) == fields
    assert set(train.RUN_FLAGS) <= set(flags)
    for dest, flag in flags.items():
        assert flag == "--" + dest.replace("_", "-")  # the field's own name


@pytest.mark.parametrize("command", ["translate", "evaluate", "export"])
def test_every_decode_field_has_a_flag(command):
    flags = _visible_flags(_subparser(command))
    assert _fields(DecodeConfig) <= set(flags)
    # Their other flags are about the command, not decoding settings.
    assert not (set(flags) - _fields(DecodeConfig)) & _fields(ModelConfig, TrainConfig)


def test_a_new_field_gets_its_flag():
    @dataclasses.dataclass(frozen=True)
    class Extra(base._DictConfig):
        smoothing_steps: int = base.setting(7, "Steps of smoothing.", positive=True)
        gentle: bool = base.setting(False, "Be gentle.")

    from tf_transformer.commands.flags import add_config_flags, config_changes

    parser = argparse.ArgumentParser()
    add_config_flags(parser, Extra)
    args = parser.parse_args(["--smoothing-steps", "3", "--gentle"])
    assert config_changes(args, Extra) == {"smoothing_steps": 3, "gentle": True}
    assert config_changes(parser.parse_args([]), Extra) == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["--smoothing-steps", "0"])  # positive, as the field says


def _help(capsys, *arguments) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", *arguments])
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("order", ["preset first", "help first"])
def test_train_help_shows_the_chosen_presets_values(capsys, order):
    arguments = ["--preset", "small-data", "--help"]
    text = _help(capsys, *(arguments if order == "preset first" else arguments[2:] + arguments[:2]))
    preset = get_train_preset("small-data")
    assert preset.eval_sentences == 1000 and preset.concat_fraction == 0.75
    assert "the first N validation pairs. (default: 1000)" in text
    assert "joined two by two, so the model learns multi-sentence inputs (0: off). " in text
    assert "(default: 0.75)" in text and "--mixed-precision {float32,float16,bfloat16,auto}" in text
    assert "a run records its choice and why in config.json). (default: auto)" in text
    assert "preset small-data's" in text
    text = _help(capsys, "--help")  # the default preset, small
    assert "the first N validation pairs. (default: 300)" in text
    assert "preset small's" in text


@pytest.mark.parametrize(
    "arguments, given",
    [
        ([], {}),
        (["--max-new-tokens", "5"], {"max_new_tokens": 5}),
        (
            ["--beam-size", "1", "--max-source-tokens", "9"],
            {"beam_size": 1, "max_source_tokens": 9},
        ),
    ],
)
def test_decoding_flags_set_only_the_fields_given(arguments, given):
    from tf_transformer.commands import decode_config

    config = decode_config(cli.build_parser().parse_args(["translate", "RUN", *arguments]))
    assert config.given() == given  # the others None: the backend's own


def test_a_run_written_by_the_previous_version_loads(tmp_path):
    """tests/fixtures/base_run_config.json: config.json as the code before the flag and naming
    change wrote it (small-data preset)."""
    (tmp_path / "run").mkdir()
    shutil.copy(BASE_CONFIG, tmp_path / "run" / "config.json")
    run = RunDir(tmp_path / "run")
    # The preset's mixed_precision is "auto" now; a run records what it resolved to, and runs
    # written before recorded the preset's "bfloat16" then.
    preset = get_train_preset("small-data").replace(max_minutes=27.0, mixed_precision="bfloat16")
    assert run.train_config() == preset
    assert run.model_config().share_embeddings and run.model_config().input_vocab_size == 3574
    assert run.data_config() == DataConfig("sample")
