"""Every registered backend through the CLI, as a user runs it: `export --format NAME`, then
`translate` (sentences), `translate --file` and `evaluate` on what was written, each equal to
the run directory's own greedy output. A new backend is tested by being registered."""

import pytest

from tests.export_helpers import tiny_run_dir
from tf_transformer import cli
from tf_transformer.backends import REGISTRY, open_translator
from tf_transformer.config import DecodeConfig
from tf_transformer.text.document import translate_document

pytestmark = [pytest.mark.slow, pytest.mark.cost(60)]

# The Python package a backend's runtime needs beyond the base install.
NEEDS = {"ctranslate2": "ctranslate2", "litert": "ai_edge_litert"}
CAPS = ["--max-source-tokens", "8", "--max-new-tokens", "8"]  # baked in at export
SENTENCES = ["o gato está na mesa .", "ela comprou um carro novo ."]
DOCUMENT = "O gato está na mesa. Ela comprou um carro novo.\n\n  Eu gosto de livros.\n"


def evaluate(capsys, model, output):
    args = ["evaluate", model, "--dataset", "sample", "--split", "test", "--limit", "6"]
    args += ["--beam-size", "1", *CAPS, "--output", output, "--quiet"]
    code = cli.main([str(a) for a in args])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    return output.read_text(encoding="utf-8")


@pytest.mark.parametrize("backend", REGISTRY, ids=lambda backend: backend.name)
def test_every_backend_translates_files_and_evaluates_as_the_run_does(backend, tmp_path, capsys):
    if backend.name in NEEDS:
        pytest.importorskip(NEEDS[backend.name])
    run = tiny_run_dir().root
    out = tmp_path / backend.name
    assert cli.main(["export", str(run), "--format", backend.name, "--out", str(out), *CAPS]) == 0
    assert f"Exported {backend.name}" in capsys.readouterr().out
    reference = open_translator(
        run, DecodeConfig(beam_size=1, max_new_tokens=8, max_source_tokens=8)
    )

    assert cli.main(["translate", str(out), *SENTENCES, "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == reference.translate(SENTENCES)

    document = tmp_path / "in.txt"
    document.write_text(DOCUMENT, encoding="utf-8")
    assert cli.main(["translate", str(out), "--file", str(document), "--beam-size", "1"]) == 0
    assert capsys.readouterr().out == translate_document(DOCUMENT, reference.translate)

    ours = evaluate(capsys, out, tmp_path / "export.txt")
    assert ours == evaluate(capsys, run, tmp_path / "run.txt")
    assert len(ours.splitlines()) == 6


# The comparisons above are exact (text against text) across kernels that round differently
# (LiteRT's, CTranslate2's, TensorFlow's, on any CPU): that holds only where the run's greedy
# choices are no near-ties. Float32 kernels differ by ~1e-6 in a log-probability here; every
# step's top two must be this much further apart.
CLEAR_MARGIN = 1e-3


def test_the_sentences_compared_across_backends_have_no_near_tie():
    from tests.export_helpers import tiny_objects
    from tests.inference.decoding.teacher_forcing import assert_greedy_choices_are_the_models
    from tf_transformer.config import DataConfig
    from tf_transformer.inference.decoding.cached_decode import make_decode_fn
    from tf_transformer.inference.translator import Translator
    from tf_transformer.text.document import split_document

    _, tokenizers, model = tiny_objects()
    config = DecodeConfig(beam_size=1, max_new_tokens=8, max_source_tokens=8)
    evaluated = DataConfig(dataset=("sample",)).load("test").take(6).as_numpy_iterator()
    sentences = [*SENTENCES, *split_document(DOCUMENT).sentences]
    sentences += [source.decode() for source, _ in evaluated]
    src = Translator(tokenizers, model, config).source_ids(sentences)
    out = make_decode_fn(model, max_new_tokens=8)(src)
    checked, near_ties = assert_greedy_choices_are_the_models(model, src, out, CLEAR_MARGIN)
    assert near_ties == 0 and checked > 0, (checked, near_ties)
