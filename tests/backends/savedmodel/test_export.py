"""Tests for tf_transformer.backends.savedmodel.export and graph_ops: signatures, bounded answers, loading without the
package, saved_model_cli, concurrency, version directories and the op list."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.export_helpers import (
    BEAM_SIZE,
    MAX_LENGTH,
    SENTENCES,
    loaded_export,
    tiny_export,
)
from tf_transformer.backends.savedmodel.graph_ops import (
    LONG_STANDING_TEXT_OPS,
    check_serving_ops,
    classify_ops,
    graph_ops,
)
from tf_transformer.backends.versions import existing_versions, next_version, write_version
from tf_transformer.config import DecodeConfig

pytestmark = [pytest.mark.slow, pytest.mark.cost(30)]
VENV_BIN = Path(sys.executable).parent

# Loads the export with nothing but tensorflow and tensorflow_text, and reports what it imported.
LOAD_SCRIPT = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](sentences=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({
    "translations": [t.decode("utf-8") for t in out["translations"].numpy()],
    "scores": out["scores"].numpy().tolist(),
    "tokens": out["tokens"].numpy().tolist(),
    "package_modules": sorted(m for m in sys.modules if m.split(".")[0] == "tf_transformer"),
}))
"""


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", **extra)
    return env


@pytest.fixture(scope="module")
def export_dir() -> Path:
    return tiny_export()[0]


@pytest.fixture(scope="module")
def loaded():
    return loaded_export()


@pytest.fixture(scope="module")
def subprocesses(export_dir, tmp_path_factory):
    """Starts the slow subprocesses at once (they overlap): plain load, two saved_model_cli runs."""
    work = tmp_path_factory.mktemp("subprocess")
    # A tensorflow-plugins folder on a path holding "site-packages": `import tensorflow` loads
    # every shared object in it (tensorflow/__init__.py), so the TF Text ops get registered.
    plugins = work / "site-packages" / "tensorflow-plugins"
    plugins.mkdir(parents=True)
    import tensorflow_text

    for library in Path(tensorflow_text.__file__).parent.rglob("_*.so"):
        (plugins / library.name).symlink_to(library)
    cli = [
        str(VENV_BIN / "saved_model_cli"),
        "run",
        "--dir",
        str(export_dir),
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--input_exprs",
        f"sentences={json.dumps(SENTENCES[:1], ensure_ascii=False)}",
    ]

    def start(command, **env):
        return subprocess.Popen(
            command,
            env=_clean_env(**env),
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    procs = {
        "load": start([sys.executable, "-c", LOAD_SCRIPT, str(export_dir), json.dumps(SENTENCES)]),
        "cli_plain": start(cli),
        "cli_plugins": start(cli, PYTHONPATH=str(work / "site-packages")),
    }
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        results[name] = (proc.returncode, stdout, stderr)
    return results


@pytest.fixture(scope="module")
def translator():
    """The in-process Translator the export was written from."""
    return tiny_export()[1].translator


def _texts(tensor):
    return [t.decode("utf-8") for t in tensor.numpy()]


def test_layout_and_signatures(export_dir, loaded):
    assert export_dir.name == "1"
    assert {p.name for p in export_dir.iterdir()} >= {
        "saved_model.pb",
        "variables",
        "assets",
        "assets.extra",
    }
    assert sorted(p.name for p in (export_dir / "assets.extra").iterdir()) == [
        "tf_serving_warmup_requests",
        "tf_transformer_decoding.json",
    ]
    decoding = json.loads(
        (export_dir / "assets.extra" / "tf_transformer_decoding.json").read_text()
    )
    assert decoding["beam_size"] == BEAM_SIZE and decoding["jit_compile"] is False
    assert sorted(p.name for p in (export_dir / "assets").iterdir()) == [
        "source.pt.vocab",
        "target.en.vocab",
    ]
    assert set(loaded.signatures) == {"serving_default", "greedy", "attention", "alternatives"}
    for name in ("serving_default", "greedy"):
        fn = loaded.signatures[name]
        (spec,) = fn.structured_input_signature[1].values()
        assert (spec.name, spec.dtype, spec.shape.as_list()) == ("sentences", tf.string, [None])
        outputs = fn.structured_outputs
        assert (outputs["translations"].dtype, outputs["translations"].shape.as_list()) == (
            tf.string,
            [None],
        )
        assert (outputs["scores"].dtype, outputs["scores"].shape.as_list()) == (tf.float32, [None])
        assert (outputs["tokens"].dtype, outputs["tokens"].shape.as_list()) == (
            tf.int64,
            [None, None],
        )
    (spec,) = loaded.signatures["attention"].structured_input_signature[1].values()
    assert (spec.name, spec.dtype, spec.shape.rank) == ("sentence", tf.string, 0)


def test_every_weight_and_no_training_state_in_the_export(export_dir, translator):
    names = [name for name, _ in tf.train.list_variables(str(export_dir / "variables/variables"))]
    assert not [n for n in names if "optimizer" in n.lower() or "train_state" in n]
    weights = [n for n in names if n.startswith("model_variables/")]
    assert len(weights) == len(translator.model.variables)


def test_loads_without_the_package_and_matches_the_translator(subprocesses, translator):
    code, stdout, stderr = subprocesses["load"]
    assert code == 0, stderr[-2000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["package_modules"] == []
    expected = translator.translate(SENTENCES)
    assert result["translations"] == _texts(expected["text"])
    np.testing.assert_allclose(result["scores"], expected["scores"].numpy(), rtol=1e-4)
    assert result["tokens"] == expected["ids"].numpy().tolist()
    # Untrained, but not constant: the comparison above can fail.
    assert len({tuple(row) for row in result["tokens"]}) > 1


def test_greedy_signature_matches_greedy_translator(loaded, translator):
    out = loaded.signatures["greedy"](sentences=tf.constant(SENTENCES))
    expected = translator.translate(SENTENCES, config=DecodeConfig(beam_size=1))
    assert _texts(out["translations"]) == _texts(expected["text"])
    np.testing.assert_allclose(out["scores"].numpy(), expected["log_probs"].numpy(), rtol=1e-4)


def test_saved_model_cli_needs_the_tf_text_ops_registered(subprocesses, loaded):
    # The stock script cannot load the graph: nothing imports tensorflow_text in it.
    code, stdout, stderr = subprocesses["cli_plain"]
    assert code != 0
    assert "Op type not registered 'NormalizeUTF8'" in stderr
    # With the TF Text libraries in a tensorflow-plugins folder it runs the signature.
    code, stdout, stderr = subprocesses["cli_plugins"]
    assert code == 0, stderr[-2000:]
    expected = loaded.signatures["serving_default"](sentences=tf.constant(SENTENCES[:1]))
    translation = expected["translations"].numpy()[0]
    assert f"Result for output key translations:\n[{translation!r}]" in stdout


@pytest.mark.parametrize(
    "sentences",
    [
        [""],
        ["   "],
        ["a" * 10_000],
        [" ".join(["palavra"] * 2_000)],
        ["😀🚀 não 🙂", "你好，世界", "Ünïcödé ÇÃÕ ß"],
        [],
        [SENTENCES[i % 5] for i in range(64)],
    ],
    ids=["empty", "spaces", "10k-chars", "2k-words", "emoji-cjk", "batch-0", "batch-64"],
)
def test_any_text_gives_a_bounded_answer(loaded, sentences):
    for name in ("serving_default", "greedy"):
        out = loaded.signatures[name](sentences=tf.constant(sentences, tf.string, [len(sentences)]))
        assert out["translations"].shape == [len(sentences)]
        assert out["scores"].shape == [len(sentences)]
        assert out["tokens"].shape[0] == len(sentences)
        assert out["tokens"].shape[1] <= MAX_LENGTH + 1
        assert np.isfinite(out["scores"].numpy()).all()
    if sentences in ([""], ["   "]):
        assert _texts(out["translations"]) == [""]


def test_wrong_dtype_or_rank_is_refused(loaded):
    fn = loaded.signatures["serving_default"]
    refused = (TypeError, ValueError, tf.errors.InvalidArgumentError)
    with pytest.raises(refused, match="expected to be a string tensor but is a int32"):
        fn(sentences=tf.constant([1, 2]))
    with pytest.raises(refused, match=r"Shape of tensor sentences \[1,2\] is not compatible"):
        fn(sentences=tf.constant([["o gato .", "eu gosto ."]]))
    with pytest.raises(refused, match=r"Shape of tensor sentence \[1\] is not compatible"):
        loaded.signatures["attention"](sentence=tf.constant(["o gato ."]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid formatting on input string"):
        fn(sentences=tf.constant([b"\xff\xfe o gato"]))


def test_attention_signature(loaded):
    sentence = SENTENCES[0]
    out = loaded.signatures["attention"](sentence=tf.constant(sentence))
    best = loaded.signatures["serving_default"](sentences=tf.constant([sentence]))
    assert out["translation"].numpy() == best["translations"].numpy()[0]
    tokens = out["tokens"].numpy()
    assert tokens[0] == 2 and (tokens[1:] > 0).all()
    assert tokens[-1] == 3 or len(tokens) == MAX_LENGTH + 1  # untrained: may never emit END
    heads, tgt_len, src_len = out["attention_weights"].shape
    assert heads == 2  # the tiny preset
    assert tgt_len == len(tokens) - 1 == out["target_tokens"].shape[0]
    assert src_len == out["source_tokens"].shape[0]
    assert out["source_tokens"].numpy()[0] == b"[START]"
    assert out["source_tokens"].numpy()[-1] == b"[END]"
    np.testing.assert_allclose(out["attention_weights"].numpy().sum(-1), 1.0, rtol=1e-5)


def test_concurrent_calls_match_serial_calls(loaded):
    signatures = ("serving_default", "greedy")
    short = ["olá .", "o gato .", "eu gosto .", "sim .", "não ."]

    def call(index):
        out = loaded.signatures[signatures[index % 2]](sentences=tf.constant([short[index % 5]]))
        return _texts(out["translations"]), out["scores"].numpy().tolist()

    serial = {i: call(i) for i in range(10)}
    results, errors = {}, []

    def worker(thread):
        try:
            for call_index in range(50):
                index = (thread + call_index) % 10
                results[(thread, call_index)] = (index, call(index))
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 400
    for index, (texts, scores) in results.values():
        assert texts == serial[index][0]
        np.testing.assert_allclose(scores, serial[index][1], rtol=1e-5)


def test_op_list_is_core_tf_plus_long_standing_tf_text(export_dir):
    ops = graph_ops(export_dir)
    classes = classify_ops(ops)
    assert classes["other"] == []
    assert set(classes["text"]) <= LONG_STANDING_TEXT_OPS
    assert {"NormalizeUTF8", "WordpieceTokenizeWithOffsets"} <= set(classes["text"])
    assert {"VarHandleOp", "StringLower"} <= set(classes["core"])
    # The decoding loop: StatelessWhile when no stateful op runs inside it.
    assert {"While", "StatelessWhile"} & set(classes["core"])
    assert "RoundRobinTrim" not in ops and "TFText>RoundRobinTrim" not in ops
    assert check_serving_ops(export_dir) == classes


def test_classify_ops_flags_unknown_and_recent_ops():
    classes = classify_ops(["MatMul", "NormalizeUTF8", "TFText>RoundRobinTrim", "MyCustomOp"])
    assert classes == {
        "core": ["MatMul"],
        "text": ["NormalizeUTF8", "TFText>RoundRobinTrim"],
        "other": ["MyCustomOp"],
    }


def test_versions_are_never_overwritten(tmp_path):
    base = tmp_path / "model"
    assert existing_versions(base) == [] and next_version(base) == 1

    def fake_save(path):
        Path(path, "saved_model.pb").write_text("v")

    assert write_version(base, None, fake_save) == base / "1"
    (base / "7").mkdir()
    (base / "notes").mkdir()  # not a version
    assert write_version(base, None, fake_save) == base / "8"
    (base / "7" / "keep.txt").write_text("untouched")
    with pytest.raises(FileExistsError, match="never overwritten"):
        write_version(base, 7, fake_save)
    assert [p.name for p in (base / "7").iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match="positive"):
        write_version(base, 0, fake_save)

    def crash(path):
        Path(path, "saved_model.pb").write_text("half")
        raise RuntimeError("crash while saving")

    with pytest.raises(RuntimeError):
        write_version(base, None, crash)
    # No version 9, no temporary leftovers.
    assert sorted(p.name for p in base.iterdir()) == ["1", "7", "8", "notes"]
