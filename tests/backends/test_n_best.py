"""n-best lists (`translate_n_best`, `translate --n-best K`): each backend's best is its
translation, the rest its other beams, without repeats; a SavedModel's come from its
`alternatives` signature and equal its Translator's beams."""

from __future__ import annotations

import pytest

from tests.export_helpers import BEAM_SIZE, SENTENCES, tiny_export, tiny_run_dir
from tf_transformer import cli
from tf_transformer.backends import open_translator
from tf_transformer.backends.base import distinct
from tf_transformer.config import DecodeConfig

pytestmark = [pytest.mark.slow, pytest.mark.cost(40)]

NEEDS = {"ctranslate2": "ctranslate2", "litert": "ai_edge_litert"}
CAPS = DecodeConfig(beam_size=BEAM_SIZE, max_new_tokens=8, max_source_tokens=8)


def check_n_best(translator, n):
    """Each list: distinct, at most `n`, led by the translation of a search with `n` beams."""
    lists = translator.translate_n_best(SENTENCES, n)
    assert len(lists) == len(SENTENCES)
    for texts in lists:
        assert 1 <= len(texts) <= n and texts == distinct(texts)
    return lists


def test_a_run_directory_lists_its_beams_best_first():
    run = open_translator(tiny_run_dir().root, CAPS)
    lists = check_n_best(run, BEAM_SIZE)
    assert [texts[0] for texts in lists] == run.translate(SENTENCES)
    assert any(len(texts) > 1 for texts in lists)  # the untrained model's beams differ
    # A longer list searches with more beams: its best is that search's translation.
    wider = open_translator(tiny_run_dir().root, CAPS.replace(beam_size=BEAM_SIZE + 2))
    assert [t[0] for t in check_n_best(run, BEAM_SIZE + 2)] == wider.translate(SENTENCES)
    assert run.translate_n_best([], 2) == []


def test_a_saved_model_lists_its_export_beams():
    path, module = tiny_export()
    exported = open_translator(path)
    lists = check_n_best(exported, BEAM_SIZE)
    beams = module.translator.all_beams(SENTENCES, BEAM_SIZE)
    assert lists == [distinct(texts) for texts in beams]
    assert [texts[0] for texts in lists] == exported.translate(SENTENCES)
    with pytest.raises(ValueError, match=f"has {BEAM_SIZE} beams: {BEAM_SIZE + 1} translations"):
        exported.translate_n_best(SENTENCES, BEAM_SIZE + 1)


@pytest.mark.parametrize("name", ["litert", "ctranslate2"])
def test_exports_without_tensorflow_list_their_beams(name, tmp_path):
    pytest.importorskip(NEEDS[name])
    out = tmp_path / name
    run = tiny_run_dir().root
    assert (
        cli.main(["export", str(run), "--format", name, "--out", str(out), "--max-new-tokens", "8"])
        == 0
    )
    translator = open_translator(out, CAPS)
    lists = check_n_best(translator, BEAM_SIZE)
    assert [texts[0] for texts in lists] == translator.translate(SENTENCES)


def test_translate_n_best_prints_indexed_lines(capsys):
    run = tiny_run_dir().root
    args = ["translate", str(run), *SENTENCES, "--n-best", "2", "--max-new-tokens", "8"]
    assert cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = open_translator(run, DecodeConfig(max_new_tokens=8)).translate_n_best(SENTENCES, 2)
    assert lines == [f"{i} ||| {text}" for i, texts in enumerate(expected) for text in texts]
    assert cli.main(["translate", str(run), "--file", "x.txt", "--n-best", "2"]) == 2
    assert "--n-best lists a sentence's translations" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["rest", "grpc"])
def test_a_served_model_lists_its_export_beams(kind):
    from tests.serve_export import served_export

    path, _ = tiny_export()
    expected = open_translator(path).translate_n_best(SENTENCES, BEAM_SIZE)
    with served_export(path, kind, "tiny") as (url, _):
        served = open_translator(url, model_name="tiny")
        assert served.translate_n_best(SENTENCES, BEAM_SIZE) == expected
        assert served.translate_n_best(SENTENCES, 1) == [texts[:1] for texts in expected]
