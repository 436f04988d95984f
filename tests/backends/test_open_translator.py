"""`open_translator`: one front door for a run directory, a SavedModel and a server; flags a
backend cannot honour are refused with one clear error instead of being ignored."""

from __future__ import annotations

import pytest

from tests.export_helpers import BEAM_SIZE, MAX_LENGTH, SENTENCES, tiny_export, tiny_run_dir
from tf_transformer.backends import open_translator
from tf_transformer.config import DecodeConfig

pytestmark = [pytest.mark.slow, pytest.mark.cost(60)]


@pytest.fixture(scope="module")
def export_path():
    path, _ = tiny_export()
    return path


def test_a_savedmodel_translates_like_its_translator_greedy_and_beam(export_path):
    _, module = tiny_export()
    beam = open_translator(export_path)
    greedy = open_translator(export_path, config=DecodeConfig(beam_size=1))
    assert beam.translate(SENTENCES) == module.translator.translate_batch(SENTENCES)
    assert greedy.translate(SENTENCES) == module.translator.translate_batch(
        SENTENCES, config=DecodeConfig(beam_size=1)
    )
    assert "signature greedy" in greedy.description
    # The export's own settings are accepted: they change nothing.
    same = open_translator(
        export_path, config=DecodeConfig(beam_size=BEAM_SIZE, max_new_tokens=MAX_LENGTH)
    )
    assert same.translate(SENTENCES[:1]) == beam.translate(SENTENCES[:1])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"config": DecodeConfig(beam_size=BEAM_SIZE + 1)},
            f"decodes with beam_size 1 or {BEAM_SIZE}; --beam-size {BEAM_SIZE + 1} needs a new export",
        ),
        ({"config": DecodeConfig(length_penalty=1.5)}, "--length-penalty 1.5 needs a new export"),
        ({"config": DecodeConfig(max_new_tokens=MAX_LENGTH + 2)}, "--max-new-tokens"),
        ({"checkpoint": "latest"}, "cannot take --checkpoint: --checkpoint picks a run directory"),
        ({"jit_compile": True}, "XLA is chosen at export time"),
    ],
)
def test_a_savedmodel_refuses_what_it_cannot_honour(export_path, settings, message):
    with pytest.raises(ValueError, match=message):
        open_translator(export_path, **settings)


def test_a_run_directory_honours_every_setting():
    run = tiny_run_dir()
    translator = open_translator(
        run.root, config=DecodeConfig(beam_size=2, length_penalty=1.0, max_new_tokens=5)
    )
    config = translator.translator.config
    assert (config.beam_size, config.length_penalty, config.max_new_tokens) == (2, 1.0, 5)
    assert translator.checkpoint_name in ("best", "averaged", "latest")
    weights, source_tokens, target_tokens = translator.attention(SENTENCES[0])
    assert weights.shape[1:] == (len(target_tokens), len(source_tokens))


def test_a_server_takes_greedy_or_its_export_and_has_no_attention():
    url = "http://127.0.0.1:9"  # nothing is sent until a translation is asked for
    with pytest.raises(ValueError, match="decodes with beam_size 1; --beam-size 3 needs"):
        open_translator(url, config=DecodeConfig(beam_size=3))
    with pytest.raises(ValueError, match="cannot take --checkpoint"):
        open_translator(url, checkpoint="best")
    server = open_translator(url, config=DecodeConfig(beam_size=1))
    assert "signature greedy" in server.description
    with pytest.raises(ValueError, match="attention plots need the TensorFlow model"):
        server.attention("olá .")
