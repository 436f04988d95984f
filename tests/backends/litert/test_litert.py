"""The LiteRT export and its runtime: builtin ops only, the TF decoder's ids, the SavedModel's
text, int8, a torn or missing file, and a runtime without TensorFlow."""

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.export_helpers import (
    DECODING,
    SENTENCES,
    _root,
    loaded_export,
    tiny_objects,
    tiny_run_dir,
)
from tf_transformer import cli
from tf_transformer.backends import open_translator
from tf_transformer.backends.litert.export import ENCODER_FILE, STEP_FILE, export_litert
from tf_transformer.config import DecodeConfig
from tf_transformer.inference.decoding.cached_decode import make_decode_fn

pytest.importorskip("ai_edge_litert")
from ai_edge_litert.interpreter import Interpreter

from tf_transformer.backends.litert.runtime import LiteRTTranslator

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)

REPO_ROOT = str(Path(__file__).resolve().parents[3])


@pytest.fixture(scope="module")
def exports():
    """`{"none": folder, "int8": folder}`: the tiny run exported with the shared DECODING."""
    _, tokenizers, model = tiny_objects()
    base = _root() / "litert"
    return {
        q: export_litert(tokenizers, model, base / q, quantization=q, config=DECODING)
        for q in ("none", "int8")
    }


def source_batch(translator):
    ids = [translator.source_ids(sentence) for sentence in SENTENCES]
    src = np.zeros((len(ids), max(map(len, ids))), np.int32)
    for row, sentence in enumerate(ids):
        src[row, : len(sentence)] = sentence
    return src


def op_names(path):
    interpreter = Interpreter(model_path=str(path))
    return collections.Counter(op["op_name"] for op in interpreter._get_ops_details())


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_builtin_ops_only_and_the_cache_written_in_place(exports, quantization):
    folder = exports[quantization]
    for name in (ENCODER_FILE, STEP_FILE):
        ops = op_names(folder / name)
        assert not [op for op in ops if op.startswith("Flex") or op in ("CUSTOM", "DELEGATE")]
        # Weights frozen (no variables); the cache is written by one slice per tensor.
        assert not {"READ_VARIABLE", "VAR_HANDLE", "SCATTER_ND"} & set(ops)
    layers = tiny_objects()[2].config.num_layers
    assert op_names(folder / STEP_FILE)["DYNAMIC_UPDATE_SLICE"] == 2 * layers
    if quantization == "int8":  # dynamic range: the weights are int8
        details = Interpreter(model_path=str(folder / STEP_FILE)).get_tensor_details()
        assert sum(d["dtype"] == np.int8 for d in details) >= 6


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("max_new_tokens", [None, 4])  # 4: caches shorter than the export's
def test_float32_ids_equal_the_tensorflow_decoder(exports, beam_size, max_new_tokens):
    _, _, model = tiny_objects()
    translator = LiteRTTranslator(exports["none"], DecodeConfig(max_new_tokens=max_new_tokens))
    src = source_batch(translator)
    ours = translator.decode(src, beam_size)
    exported = DECODING.resolved(model.config.max_length)  # what the export baked in
    assert translator.cache_positions() == (max_new_tokens or exported.max_new_tokens)
    decode = make_decode_fn(
        model,
        max_new_tokens=translator.config.max_new_tokens,
        beam_size=beam_size,
        length_penalty=exported.length_penalty,
    )
    expected = decode(tf.constant(src, tf.int64)).ids.numpy()
    assert ours.tolist() == expected.tolist()


@pytest.mark.parametrize("signature, beam_size", [("greedy", 1), ("serving_default", 3)])
def test_text_equals_the_saved_models(exports, signature, beam_size):
    sentences = [*SENTENCES, "", "O Gato, (na) mesa?!"]
    expected = loaded_export().signatures[signature](sentences=tf.constant(sentences))
    translator = open_translator(exports["none"].parent, DecodeConfig(beam_size=beam_size))
    assert translator.translate(sentences) == [
        text.decode("utf-8") for text in expected["translations"].numpy()
    ]


def test_int8_agrees_with_float32_on_most_tokens(exports):
    float32, int8 = (
        LiteRTTranslator(exports[q], DecodeConfig(beam_size=1)) for q in ("none", "int8")
    )
    src = source_batch(float32)
    a, b = float32.decode(src), int8.decode(src)
    width = max(a.shape[1], b.shape[1])
    a, b = (np.pad(x, [(0, 0), (0, width - x.shape[1])]) for x in (a, b))
    assert (a == b).mean() >= 0.7


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_a_missing_or_torn_file_is_one_error_line(exports, tmp_path, capsys, damage):
    folder = tmp_path / "1"
    shutil.copytree(exports["none"], folder)
    step = folder / STEP_FILE
    if damage == "missing":
        step.unlink()
    else:
        step.write_bytes(step.read_bytes()[: step.stat().st_size // 2])
    assert cli.main(["translate", str(tmp_path), "o gato ."]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(step) in error
    assert ("is missing" if damage == "missing" else "is damaged") in error


def test_an_unreadable_file_says_so_and_a_damaged_one_says_export_again(
    exports, tmp_path, capsys, monkeypatch
):
    folder = tmp_path / "1"
    shutil.copytree(exports["none"], folder)
    metadata = folder / "litert.json"
    read_bytes = Path.read_bytes

    def denied(path):
        if path == metadata:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert cli.main(["translate", str(folder), "o gato ."]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"cannot read {metadata}: Permission denied" in error
    assert "export the run again" not in error  # the export is not at fault
    monkeypatch.undo()
    metadata.write_text("{not json")
    assert cli.main(["translate", str(folder), "o gato ."]) == 2
    error = capsys.readouterr().err
    assert f"{metadata} is unreadable (JSONDecodeError): export the run again" in error


def test_without_the_private_invoke_the_public_one_gives_the_same_ids(exports, monkeypatch):
    from tf_transformer.backends.litert import runtime

    fast = LiteRTTranslator(exports["none"], DecodeConfig(max_new_tokens=6))
    assert fast.step.raw_invoke  # ai-edge-litert 2.3 (constraints.txt) has it
    monkeypatch.setattr(runtime, "has_raw_invoke", lambda interpreter: False)
    calls = collections.Counter()
    invoke = Interpreter.invoke

    def counted(interpreter):
        calls["invoke"] += 1
        return invoke(interpreter)  # raises while a view into the buffers is alive

    monkeypatch.setattr(Interpreter, "invoke", counted)
    public = LiteRTTranslator(exports["none"], DecodeConfig(max_new_tokens=6))
    assert not public.step.raw_invoke and not public.encoder.raw_invoke
    src = source_batch(fast)
    for beam_size in (1, 3):
        assert public.decode(src, beam_size).tolist() == fast.decode(src, beam_size).tolist()
    assert calls["invoke"] >= 4  # each decode: the encoder and at least one step


def test_cli_export_writes_versions_and_translate_reads_them(tmp_path, capsys):
    base = tmp_path / "tiny-litert"
    run = str(tiny_run_dir().root)
    assert cli.main(["export", run, "--format", "litert", "--out", str(base)]) == 0
    arguments = ["--quantization", "int8", "--max-new-tokens", "8"]
    assert cli.main(["export", run, "--format", "litert", "--out", str(base), *arguments]) == 0
    assert sorted(p.name for p in base.iterdir()) == ["1", "2"]
    capsys.readouterr()
    assert cli.main(["translate", str(base), "--beam-size", "1", *SENTENCES[:2]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == LiteRTTranslator(base / "2", DecodeConfig(beam_size=1)).translate(SENTENCES[:2])
    assert cli.main(["export", run, "--format", "litert", "--quantization", "float16"]) == 2
    assert "none or int8" in capsys.readouterr().err


def test_translate_file_reads_a_litert_export_as_any_other(exports, tmp_path, capsys):
    # A file's lines are split into sentences and put back, as for a run or a SavedModel (this
    # ended in "'LiteRTTranslator' object has no attribute 'translate_document'").
    document = tmp_path / "in.txt"
    document.write_text(f"{SENTENCES[0]}\n\n  {SENTENCES[1]}\n{SENTENCES[2]}\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    arguments = ["--beam-size", "1", "--file", str(document), "--output", str(out)]
    assert cli.main(["translate", str(exports["none"]), *arguments]) == 0
    translator = LiteRTTranslator(exports["none"], DecodeConfig(beam_size=1))
    first, second, third = translator.translate(SENTENCES[:3])
    assert out.read_text(encoding="utf-8") == f"{first}\n\n  {second}\n{third}\n"


def test_the_runtime_needs_no_tensorflow(exports):
    """ai-edge-litert, numpy and regex: the runtime translates with TensorFlow unimportable."""
    script = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "from tf_transformer.config import DecodeConfig\n"
        "from tf_transformer.backends import open_translator\n"
        f"t = open_translator({str(exports['none'])!r}, DecodeConfig(beam_size=3))\n"
        f"print(repr(t.translate({SENTENCES[:2]!r})))\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = LiteRTTranslator(exports["none"], DecodeConfig(beam_size=3)).translate(SENTENCES[:2])
    assert result.stdout.strip().splitlines()[-1] == repr(expected)
