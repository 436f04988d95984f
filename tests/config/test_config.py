import dataclasses
import json

import pytest

from tf_transformer.config import PRESETS, ModelConfig, get_preset


def test_presets_have_the_documented_sizes():
    tutorial = get_preset("tutorial")
    assert (tutorial.num_layers, tutorial.d_model, tutorial.dff, tutorial.num_heads) == (
        4,
        128,
        512,
        8,
    )
    assert tutorial.dropout_rate == 0.1
    base = get_preset("base")
    assert (base.num_layers, base.d_model, base.dff, base.num_heads) == (6, 512, 2048, 8)
    assert {"tiny", "tutorial", "base"} <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_that_ties_the_embeddings_learns_one_vocabulary(name):
    # `tf-transformer train --preset NAME` takes both configs from the preset: the model's
    # share_embeddings is refused at training time unless the tokenizers share a vocabulary.
    from tf_transformer.config import get_train_preset

    assert get_preset(name).share_embeddings == get_train_preset(name).shared_vocab


def test_config_is_frozen_and_round_trips():
    config = get_preset("tiny").replace(input_vocab_size=11)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 3
    assert ModelConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": 10, "num_heads": 3}, "divisible"),
        ({"positional_layout": "spiral"}, "positional_layout"),
        ({"dropout_rate": 1.5}, "dropout_rate"),
        ({"attention_dropout": 1.0}, "attention_dropout"),
        ({"activation_dropout": -0.1}, "activation_dropout"),
        ({"word_dropout": 1.5}, "word_dropout"),
    ],
)
def test_invalid_config_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        get_preset("tiny").replace(**changes)


def test_regularization_dropouts_default_to_off_and_round_trip():
    config = get_preset("small")
    assert (config.attention_dropout, config.activation_dropout, config.word_dropout) == (0, 0, 0)
    changed = config.replace(attention_dropout=0.1, activation_dropout=0.2, word_dropout=0.3)
    assert ModelConfig.from_dict(changed.to_dict()) == changed
    assert json.loads(changed.to_json())["word_dropout"] == 0.3
    # A config.json written before these fields existed loads with them off.
    old = {
        key: value
        for key, value in config.to_dict().items()
        if key not in ("attention_dropout", "activation_dropout", "word_dropout")
    }
    assert ModelConfig.from_dict(old) == config


def test_unknown_preset_and_field_name_the_valid_ones():
    with pytest.raises(ValueError, match="tiny"):
        get_preset("huge")
    with pytest.raises(ValueError, match="d_modle"):
        ModelConfig.from_dict({"d_modle": 3})


def test_lower_case_source_defaults_off_and_round_trips_through_config_json(tmp_path):
    from tf_transformer.config import TrainConfig
    from tf_transformer.run_dir import RunDir

    assert TrainConfig().lower_case_source is False
    config = TrainConfig(lower_case_source=True, shared_vocab=True)
    run = RunDir(tmp_path / "run")
    run.write_config({"train": config.to_dict()})
    assert run.train_config() == config
    # A config.json written before the field existed loads with it off.
    old = {k: v for k, v in config.to_dict().items() if k != "lower_case_source"}
    run.write_config({"train": old})
    assert run.train_config() == config.replace(lower_case_source=False)


def test_the_bfloat16_presets_let_the_cpu_choose_and_set_values_stay():
    from tf_transformer.config import TRAIN_PRESETS, TrainConfig

    # bfloat16 is slower than float32 where it is emulated: the presets that used it say "auto".
    assert {name for name, c in TRAIN_PRESETS.items() if c.mixed_precision == "auto"} == {
        "small-data",
        "mixed-data",
    }
    assert TrainConfig().mixed_precision is None and TRAIN_PRESETS["tiny"].mixed_precision is None
    for value in (None, "float16", "bfloat16", "auto"):
        config = TrainConfig(mixed_precision=value)
        assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        TrainConfig(mixed_precision="float64")
