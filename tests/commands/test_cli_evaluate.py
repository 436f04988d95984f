"""`tf-transformer evaluate` and `translate` on a run directory and on its exported SavedModel."""

import json
import subprocess
import sys

import pytest

from tests.export_helpers import tiny_export, tiny_run_dir
from tf_transformer.backends import open_translator
from tf_transformer.backends.versions import find_version
from tf_transformer.config import DecodeConfig

pytestmark = [pytest.mark.slow, pytest.mark.cost(260)]


def cli(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "tf_transformer.cli", *map(str, args)],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_evaluate_prints_scores_signatures_and_writes_hypotheses(tmp_path, capsys):
    from tf_transformer.cli import main

    output = tmp_path / "hyp.txt"
    args = (
        "evaluate",
        tiny_run_dir().root,
        "--dataset",
        "sample",
        "--split",
        "test",
        "--limit",
        "12",
        "--beam-size",
        "1",
        "--max-source-tokens",
        "8",
        "--max-new-tokens",
        "8",
        "--output",
        output,
        "--quiet",
    )
    code = main([str(arg) for arg in args])  # in this process: TensorFlow is imported already
    result = capsys.readouterr()
    assert code == 0, result.err
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a" in result.out
    assert "BLEU lower-cased signature: nrefs:1|case:lc|eff:no|tok:13a" in result.out
    assert "chrF signature: nrefs:1|case:mixed" in result.out
    # The sample references are lower-cased and tokenized: hypotheses are put in their style.
    assert "references are lower-cased and tokenized" in result.out
    scores = json.loads(result.out.strip().splitlines()[-1])
    assert list(scores) == ["bleu", "bleu_lc", "chrf"]  # cased BLEU first: the headline
    assert 0 <= scores["bleu"] == scores["bleu_lc"] <= 100
    assert len(output.read_text().splitlines()) == 12


def test_run_dir_and_saved_model_translate_alike():
    path, module = tiny_export()
    assert (
        find_version(path.parent, "saved_model.pb") == path
    )  # a base path resolves to its highest version
    sentences = ["o gato está na mesa .", "ela comprou um carro novo ."]
    exported = open_translator(path.parent, config=DecodeConfig(beam_size=1))
    assert "greedy" in exported.description
    assert exported.translate(sentences) == module.translator.translate_batch(
        sentences, config=DecodeConfig(beam_size=1)
    )
    assert exported.translate([]) == []


def test_translate_cli_reads_a_saved_model(tmp_path):
    path, module = tiny_export()
    png = tmp_path / "attention.png"
    result = cli(
        "translate",
        path,
        "--beam-size",
        "1",
        "--plot-attention",
        png,
        stdin="o gato está na mesa .\n\nela comprou um carro novo .\n",
    )
    assert result.returncode == 0, result.stderr
    expected = module.translator.translate_batch(
        ["o gato está na mesa .", "", "ela comprou um carro novo ."],
        config=DecodeConfig(beam_size=1),
    )
    assert result.stdout.splitlines() == expected
    assert png.stat().st_size > 1000


def test_evaluate_refuses_what_is_not_a_model(tmp_path):
    result = cli("evaluate", tmp_path / "missing", "--limit", "3")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "neither a run directory" in result.stderr


def test_evaluate_a_split_named_by_its_files(tmp_path, capsys):
    from tf_transformer.cli import main

    corpus = tmp_path / "flores"
    corpus.mkdir()
    (corpus / "devtest.pt").write_text("o gato está na mesa .\neu gosto de livros .\n")
    (corpus / "devtest.en").write_text("the cat is on the table .\ni like books .\n")
    output = tmp_path / "hyp.txt"
    common = ["evaluate", str(tiny_run_dir().root), "--dataset", str(corpus), "--quiet"]
    common += ["--beam-size", "1", "--max-source-tokens", "8", "--max-new-tokens", "8"]
    common += ["--output", str(output)]
    assert main([*common, "--split", "devtest"]) == 0
    out = capsys.readouterr().out
    assert f"dataset: {corpus} (--dataset), split devtest" in out
    assert list(json.loads(out.strip().splitlines()[-1])) == ["bleu", "bleu_lc", "chrf"]
    assert len(output.read_text().splitlines()) == 2
    output.unlink()
    assert main([*common, "--split", "test"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "splits found: devtest (--split NAME)" in error
    assert not output.exists()
