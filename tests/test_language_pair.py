"""Any language pair: the languages are configuration, not names in the code (en->pt here)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tensorflow as tf

from tf_transformer import cli
from tf_transformer.config import DataConfig
from tf_transformer.data import load_dataset

pytestmark = pytest.mark.cost(120)  # seconds in make test (measured)


def _pairs(dataset):
    return [(a.decode(), b.decode()) for a, b in dataset.as_numpy_iterator()]


def test_builtin_corpora_serve_both_directions_and_refuse_others():
    forward = _pairs(load_dataset("sample", "dev").take(3))
    backward = _pairs(load_dataset("sample", "dev", source_lang="en", target_lang="pt").take(3))
    assert backward == [(en, pt) for pt, en in forward]
    with pytest.raises(ValueError, match="no pt->de direction"):
        load_dataset("sample", "dev", source_lang="pt", target_lang="de")


def test_text_files_are_read_by_language_code(tmp_path):
    (tmp_path / "train.de").write_text("hallo welt\nguten tag\n")
    (tmp_path / "train.fr").write_text("bonjour le monde\nbonjour\n")
    pairs = _pairs(DataConfig(str(tmp_path), source_lang="de", target_lang="fr").load("train"))
    assert pairs == [("hallo welt", "bonjour le monde"), ("guten tag", "bonjour")]
    # The reverse direction of the same folder is the same files read the other way round.
    reverse = _pairs(load_dataset(tmp_path, "train", source_lang="fr", target_lang="de"))
    assert reverse == [(fr, de) for de, fr in pairs]


def test_same_source_and_target_language_is_refused():
    with pytest.raises(ValueError, match="both 'en'"):
        DataConfig(source_lang="en", target_lang="en")


@pytest.mark.slow
def test_train_and_translate_en_to_pt_from_text_files(tmp_path):
    # A corpus on disk in the reverse direction of the sample: train.en -> train.pt.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, name in (("train", "train"), ("validation", "dev")):
        pairs = _pairs(load_dataset("sample", split).take(3000 if split == "train" else 50))
        (corpus / f"{name}.en").write_text("".join(en + "\n" for _, en in pairs))
        (corpus / f"{name}.pt").write_text("".join(pt + "\n" for pt, _ in pairs))
    run_dir = tmp_path / "run"
    # Trained here (the process has TensorFlow already); translated in a new process.
    train = [
        "train", "--dataset", str(corpus), "--source-lang", "en", "--target-lang", "pt",
        "--preset", "tiny", "--max-steps", "40", "--run-dir", str(run_dir), "--quiet",
    ]  # fmt: skip
    assert cli.main(train) == 0
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["data"]["source_lang"], config["data"]["target_lang"]) == ("en", "pt")
    assert sorted(p.name for p in (run_dir / "tokenizers" / "assets").iterdir()) == [
        "source.en.vocab",
        "target.pt.vocab",
    ]
    translate = [sys.executable, "-m", "tf_transformer.cli", "translate", str(run_dir)]
    out = subprocess.run(
        [*translate, "the red car is new .", "--beam-size", "1"],
        check=True,
        capture_output=True,
        text=True,
    )
    translation = out.stdout.strip()

    from tf_transformer.run_dir import RunDir

    tokenizers = RunDir(run_dir).load_tokenizers()
    assert [code.decode() for code in tokenizers.languages.numpy()] == ["en", "pt"]
    # The source side is the English vocabulary (no [UNK] in an English sentence), the model's
    # input and output sizes are the source and target vocabularies, and whatever the barely
    # trained model writes is made of Portuguese wordpieces (no [UNK] when re-tokenized).
    english = tokenizers.source.tokenize(tf.constant(["the red car is new ."]))
    assert 1 not in english.flat_values.numpy()
    model_config = RunDir(run_dir).model_config()
    assert model_config.input_vocab_size == int(tokenizers.source.get_vocab_size())
    assert model_config.target_vocab_size == int(tokenizers.target.get_vocab_size())
    assert model_config.input_vocab_size != model_config.target_vocab_size
    if translation:
        portuguese = tokenizers.target.tokenize(tf.constant([translation]))
        assert 1 not in portuguese.flat_values.numpy()
