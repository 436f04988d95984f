"""The exported SavedModel returns the same cased, detokenized text as the Python Translator,
in a process that imports only tensorflow and tensorflow_text."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.written_text import written_pairs
from tf_transformer.backends.savedmodel.export import ExportModule
from tf_transformer.backends.savedmodel.graph_ops import (
    LONG_STANDING_TEXT_OPS,
    classify_ops,
    graph_ops,
)
from tf_transformer.config import DecodeConfig, get_preset
from tf_transformer.data.sample import sample_pairs
from tf_transformer.model import Transformer
from tf_transformer.text.tokenizers import UNK_ID, Tokenizers, build_tokenizers
from tf_transformer.text.truecase import capitalize_first_letter

pytestmark = [pytest.mark.slow, pytest.mark.cost(160)]

MAX_LENGTH = 8
SENTENCES = [
    "O gato está na mesa.",
    "Ela comprou um carro novo?",
    "AS CRIANÇAS não estavam no parque.",  # capitals the vocabulary never saw: [UNK]
    "nós vamos à praia amanhã",
    "Eu não gosto do carro do menino.",
]
WRITTEN = "The boy's car is new? I don't see the cat."

LOAD_SCRIPT = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
outs = []
for path, texts, written_ids in json.loads(sys.argv[1]):
    loaded = tf.saved_model.load(path)
    sentences = tf.constant(texts)
    best = loaded.signatures["serving_default"](sentences=sentences)
    greedy = loaded.signatures["greedy"](sentences=sentences)
    ids = tf.ragged.constant(written_ids, tf.int64).to_tensor()
    outs.append({
        "translations": [t.decode("utf-8") for t in best["translations"].numpy()],
        "tokens": best["tokens"].numpy().tolist(),
        "greedy": [t.decode("utf-8") for t in greedy["translations"].numpy()],
        "source_ids": loaded.tokenizers.source.tokenize(sentences).to_list(),
        "detokenized": [
            t.decode("utf-8") for t in loaded.tokenizers.target.detokenize(ids).numpy()
        ],
    })
modules = sorted(m for m in sys.modules if m.split(".")[0] == "tf_transformer")
print(json.dumps({"outs": outs, "package_modules": modules}))
"""


def _load_without_project_code(jobs: list[tuple[Path, list[str], list[list[int]]]]) -> list[dict]:
    """Runs LOAD_SCRIPT on each `(SavedModel path, sentences, target ids)` job, all in one
    process that cannot import the project (one TensorFlow start for the module's exports)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    jobs = [[str(path), sentences, ids] for path, sentences, ids in jobs]
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, json.dumps(jobs)],
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(jobs[0][0]).parent,  # so the project package cannot be imported by accident
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["package_modules"] == []
    return out["outs"]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """`(version_dir, module)`: cased tokenizers and an untrained tiny model, exported."""
    root = tmp_path_factory.mktemp("cased_export")
    pairs = written_pairs(sample_pairs("train", size=600))
    ds = tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))
    tokenizers = build_tokenizers(
        ds, vocab_size=400, vocab_dir=root / "vocab", learn_params={"num_iterations": 1}
    )
    config = get_preset("tiny").replace(
        input_vocab_size=int(tokenizers.source.get_vocab_size()),
        target_vocab_size=int(tokenizers.target.get_vocab_size()),
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_config(config)
    model.build()
    module = ExportModule(
        tokenizers,
        model,
        config=DecodeConfig(beam_size=3, max_source_tokens=MAX_LENGTH, max_new_tokens=MAX_LENGTH),
    )
    return module.export(root / "saved_models" / "cased"), module


def _variant(module, tokenizers, path):
    """`module`'s model with other tokenizers, exported to `path`: `(path, module)`."""
    variant = ExportModule(
        tokenizers,
        module.model,
        config=DecodeConfig(beam_size=3, max_source_tokens=MAX_LENGTH, max_new_tokens=MAX_LENGTH),
    )
    return variant.export(path), variant


def _vocab_paths(module) -> list[str]:
    source, target = module.tokenizers.source, module.tokenizers.target
    return [t.get_vocab_path().numpy().decode() for t in (source, target)]


@pytest.fixture(scope="module")
def lower_source_export(export, tmp_path_factory):
    """The same model and vocabularies with a lower-casing source tokenizer, exported."""
    _, module = export
    tokenizers = Tokenizers(*_vocab_paths(module), lower_case_source=True)
    root = tmp_path_factory.mktemp("lower_source")
    return _variant(module, tokenizers, root / "saved_models" / "lower_source")


@pytest.fixture(scope="module")
def truecase_export(export, tmp_path_factory):
    """The same model with a truecasing target tokenizer (`truecase_target`), exported."""
    _, module = export
    tokenizers = Tokenizers(*_vocab_paths(module), target_first_words=["The"])
    root = tmp_path_factory.mktemp("truecase")
    return _variant(module, tokenizers, root / "saved_models" / "truecase")


LOWER_SOURCE_SENTENCES = [SENTENCES[0], SENTENCES[0].upper(), SENTENCES[0].lower(), SENTENCES[1]]


@pytest.fixture(scope="module")
def loaded(export, lower_source_export, truecase_export):
    """What a process without project code reads from each export (see `LOAD_SCRIPT`):
    `{"cased" | "lower_source" | "truecase": outputs}`, one process for the three."""
    exports = {"cased": export, "lower_source": lower_source_export, "truecase": truecase_export}
    jobs = []
    for name, (path, module) in exports.items():
        written_ids = module.tokenizers.target.tokenize(tf.constant([WRITTEN])).to_list()
        sentences = LOWER_SOURCE_SENTENCES if name == "lower_source" else SENTENCES
        jobs.append((path, sentences, written_ids))
    return dict(zip(exports, _load_without_project_code(jobs), strict=True))


def test_saved_model_matches_translator_without_project_code(export, loaded):
    _, module = export
    translator, tokenizers = module.translator, module.tokenizers
    written_ids = tokenizers.target.tokenize(tf.constant([WRITTEN]))
    assert UNK_ID not in written_ids.flat_values.numpy()
    out = loaded["cased"]

    # The same text (cased, detokenized in the graph) and the same ids as the Translator.
    expected = translator.translate(SENTENCES)
    texts = [t.decode("utf-8") for t in expected["text"].numpy()]
    assert out["translations"] == texts
    assert out["tokens"] == expected["ids"].numpy().tolist()
    assert len(set(texts)) > 1  # untrained, but not constant: the comparison can fail
    greedy = translator.translate_batch(SENTENCES, config=DecodeConfig(beam_size=1))
    assert out["greedy"] == greedy

    # Case reaches the graph's tokenizer: "O gato" is not "o gato"; unseen capitals are [UNK].
    source_ids = tokenizers.source.tokenize(tf.constant(SENTENCES)).to_list()
    assert out["source_ids"] == source_ids
    lower = tokenizers.source.tokenize(tf.constant([SENTENCES[0].lower()])).to_list()[0]
    assert source_ids[0] != lower and source_ids[0][2:] == lower[2:]
    assert UNK_ID in source_ids[2] and UNK_ID not in source_ids[0] + source_ids[1]
    # And the graph's detokenizer writes cased text with punctuation and clitics attached.
    assert out["detokenized"] == [WRITTEN]


def test_cased_export_uses_only_allowed_ops(export):
    path, _ = export
    classes = classify_ops(graph_ops(path))
    assert classes["other"] == []
    assert set(classes["text"]) <= LONG_STANDING_TEXT_OPS
    assert "StaticRegexReplace" in classes["core"]  # the detokenizer's rules


def test_in_process_signature_equals_translator_on_scores(export):
    _, module = export
    out = module(SENTENCES)
    expected = module.translator.translate(SENTENCES)
    np.testing.assert_allclose(out["scores"].numpy(), expected["scores"].numpy(), rtol=1e-5)


def test_lower_case_source_export_reads_any_case_and_writes_cased_text(lower_source_export, loaded):
    """The same model and vocabularies with a lower-casing source tokenizer (lower_case_source):
    the SavedModel, without project code, translates "O GATO" as "o gato", like the Translator."""
    _, lower_module = lower_source_export
    tokenizers = lower_module.tokenizers
    sentences = LOWER_SOURCE_SENTENCES
    out = loaded["lower_source"]
    assert out["source_ids"][0] == out["source_ids"][1] == out["source_ids"][2]
    assert out["source_ids"] == tokenizers.source.tokenize(tf.constant(sentences)).to_list()
    expected = lower_module.translator.translate(sentences)
    assert out["translations"] == [t.decode("utf-8") for t in expected["text"].numpy()]
    assert out["translations"][0] == out["translations"][1] == out["translations"][2]
    assert out["detokenized"] == [WRITTEN]  # the target side keeps case


def test_truecasing_export_capitalises_like_the_translator(export, truecase_export, loaded):
    """The same model with a truecasing target tokenizer (`truecase_target`): the SavedModel,
    without project code, lowers "The" before tokenizing and capitalises each translation's
    first letter, like the Translator, and still needs only core TF and TF Text ops."""
    _, module = export
    path, true_module = truecase_export
    tokenizers, target = true_module.tokenizers, module.tokenizers.target
    classes = classify_ops(graph_ops(path))
    assert classes["other"] == [] and set(classes["text"]) <= LONG_STANDING_TEXT_OPS
    lowered = "the" + WRITTEN[3:]
    written_ids = tokenizers.target.tokenize(tf.constant([WRITTEN])).to_list()
    assert written_ids == target.tokenize(tf.constant([lowered])).to_list()
    out = loaded["truecase"]
    expected = true_module.translator.translate(SENTENCES)
    assert out["translations"] == [t.decode("utf-8") for t in expected["text"].numpy()]
    untrue = module.translator.translate(SENTENCES, config=DecodeConfig(beam_size=3))[
        "text"
    ].numpy()
    capitalised = capitalize_first_letter(tf.constant(untrue)).numpy()
    assert out["translations"] == [t.decode("utf-8") for t in capitalised]
    assert out["detokenized"] == [WRITTEN]
