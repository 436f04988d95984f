"""Tests for the XLA export (`ExportModule(jit_compile=True)`) and the TF Serving warm-up requests
that every export writes (tf_transformer.backends.savedmodel.warmup)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from tests.export_helpers import (
    SENTENCES,
    XLA_WARMUP_BATCH_SIZES,
    loaded_export,
    tiny_export,
    tiny_objects,
    tiny_xla_export,
)
from tf_transformer.backends.savedmodel.export import ExportModule
from tf_transformer.backends.savedmodel.signatures import pad_batch
from tf_transformer.backends.savedmodel.warmup import (
    MAX_RECORDS,
    WarmupRequest,
    read_warmup_requests,
    warmup_path,
    write_warmup_requests,
)
from tf_transformer.config import DecodeConfig
from tf_transformer.inference.decoding.cached_decode import SRC_LENGTH_BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.cost(50)]

# Loads the XLA export with nothing but tensorflow and tensorflow_text and decodes a batch of 3
# (padded to 4 inside the graph) with both decoding signatures.
LOAD_SCRIPT = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
sentences = tf.constant(json.loads(sys.argv[2]))
result = {name: loaded.signatures[name](sentences=sentences)["tokens"].numpy().tolist()
          for name in ("serving_default", "greedy")}
result["package_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "tf_transformer")
print(json.dumps(result))
"""
BATCH = SENTENCES[:3]


@pytest.fixture(scope="module")
def xla_dir():
    return tiny_xla_export()[0]


@pytest.fixture(scope="module")
def xla_subprocess(xla_dir):
    """Started by the first test and left running while the next ones work in process; the
    last test reads its result."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Level 0 keeps TF's INFO line "Compiled cluster using XLA!" (logged once per process).
    env.update(TF_CPP_MIN_LOG_LEVEL="0", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen(
        [sys.executable, "-c", LOAD_SCRIPT, str(xla_dir), json.dumps(BATCH)],
        env=env,
        cwd=xla_dir.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def loaded_xla(xla_subprocess):
    return tf.saved_model.load(str(tiny_xla_export()[0]))


def _meta_graph(export_dir):
    proto = saved_model_pb2.SavedModel.FromString((export_dir / "saved_model.pb").read_bytes())
    (meta_graph,) = proto.meta_graphs
    return meta_graph


def _signature_specs(meta_graph):
    """name -> (inputs, outputs) as {key: (dtype, shape)}: the signature without tensor names."""

    def specs(tensors):
        return {key: (t.dtype, t.tensor_shape.SerializeToString()) for key, t in tensors.items()}

    return {
        name: (specs(sig.inputs), specs(sig.outputs))
        for name, sig in meta_graph.signature_def.items()
        if name != "__saved_model_init_op"
    }


def test_jit_compile_is_kept_in_the_saved_graph_and_signatures_do_not_change(
    xla_dir, xla_subprocess
):
    xla, graph = _meta_graph(xla_dir), _meta_graph(tiny_export()[0])

    def must_compile(meta_graph):
        return [
            f.signature.name
            for f in meta_graph.graph_def.library.function
            if f.attr["_XlaMustCompile"].b
        ]

    # The greedy, the beam-search and the all-beams (alternatives) decoding loop (encoder
    # included), one function each.
    assert len(must_compile(xla)) == 3
    assert all("decode" in name for name in must_compile(xla))
    assert must_compile(graph) == []
    assert _signature_specs(xla) == _signature_specs(graph)
    assert set(_signature_specs(xla)) == {"serving_default", "greedy", "attention", "alternatives"}


@pytest.mark.parametrize("batch, bucket", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (9, 16)])
def test_pad_batch_rounds_up_to_a_power_of_two_with_the_first_sentence(batch, bucket):
    sentences = tf.constant([f"s{i}" for i in range(batch)])
    padded = pad_batch(sentences).numpy().tolist()
    assert padded == [f"s{i}".encode() for i in range(batch)] + [b"s0"] * (bucket - batch)


def _source_length(module, sentence: bytes) -> int:
    return int(tf.shape(module.translator.source_ids(tf.constant([sentence])))[1])


def test_warmup_requests_cover_every_source_bucket_and_batch_size():
    _, tokenizers, model = tiny_objects()
    # max_source_tokens 40: source buckets of 16, 32 and 48 columns (the last holds at most 40 ids).
    module = ExportModule(
        tokenizers,
        model,
        config=DecodeConfig(max_source_tokens=40, max_new_tokens=40),
        jit_compile=True,
        warmup_batch_sizes=(4, 1),
    )
    assert module.source_buckets() == [16, 32, 40]
    requests = module.warmup_requests()
    seen = []
    for request in requests:
        (key,) = request.inputs
        values = np.atleast_1d(request.inputs[key])
        lengths = {_source_length(module, sentence) for sentence in values}
        assert len(lengths) == 1
        seen.append((request.signature_name, key, len(values), lengths.pop()))
    expected = [
        (name, "sentences", batch, length)
        for name in ("serving_default", "greedy")
        for batch in (1, 4)
        for length in (16, 32, 40)
    ] + [("attention", "sentence", 1, length) for length in (16, 32, 40)]
    assert seen == expected
    # Each length is the top of its bucket: all the shapes XLA compiles for these batch sizes.
    padded = {-(-length // SRC_LENGTH_BUCKET) * SRC_LENGTH_BUCKET for *_, length in seen}
    assert padded == {16, 32, 48}
    # A graph export runs every shape alike: one request per signature.
    graph = ExportModule(
        tokenizers, model, config=DecodeConfig(max_source_tokens=40, max_new_tokens=40)
    )
    assert [(r.signature_name, np.size(*r.inputs.values())) for r in graph.warmup_requests()] == [
        ("serving_default", 1),
        ("greedy", 1),
        ("attention", 1),
    ]


def test_warmup_batch_sizes_must_be_powers_of_two():
    _, tokenizers, model = tiny_objects()
    with pytest.raises(ValueError, match=r"powers of two, got \[3\]"):
        ExportModule(tokenizers, model, jit_compile=True, warmup_batch_sizes=(1, 3))


def _records(export_dir) -> list[bytes]:
    path = warmup_path(export_dir)
    assert path == export_dir / "assets.extra" / "tf_serving_warmup_requests"
    return list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())


@pytest.mark.parametrize("kind", ["graph", "xla"])
def test_warmup_file_parses_as_prediction_logs_that_replay(kind, loaded_xla):
    export_dir, module = tiny_xla_export() if kind == "xla" else tiny_export()
    loaded = loaded_xla if kind == "xla" else loaded_export()
    records = _records(export_dir)
    batch_sizes = XLA_WARMUP_BATCH_SIZES if kind == "xla" else (1,)
    assert len(records) == 2 * len(batch_sizes) + 1  # one source bucket (max_source_tokens 8)
    batches = []
    for record in records:
        log = prediction_log_pb2.PredictionLog.FromString(record)
        assert log.WhichOneof("log_type") == "predict_log"
        assert log.SerializeToString() == record  # no field unknown to TF Serving's protos
        request = log.predict_log.request
        assert request.model_spec.name == export_dir.parent.name
        signature = loaded.signatures[request.model_spec.signature_name]
        specs = signature.structured_input_signature[1]
        assert set(request.inputs) == set(specs)
        inputs = {}
        for key, tensor in request.inputs.items():
            value = tf.make_ndarray(tensor)
            assert tf.as_dtype(tensor.dtype) == specs[key].dtype == tf.string
            assert specs[key].shape.is_compatible_with(value.shape)
            inputs[key] = tf.constant(value)
        outputs = signature(**inputs)  # what TF Serving does at load; XLA compiles here
        assert set(outputs) == set(signature.structured_outputs)
        if "sentences" in inputs:
            batches.append(len(inputs["sentences"]))
            assert outputs["tokens"].shape[0] == len(inputs["sentences"])
    assert sorted(set(batches)) == list(batch_sizes)
    assert _plain(read_warmup_requests(export_dir)) == _plain(module.warmup_requests())


def _plain(requests):
    """Requests as comparable tuples: (signature, {input: nested list of bytes})."""
    return [(r.signature_name, {k: v.tolist() for k, v in r.inputs.items()}) for r in requests]


def test_more_requests_than_tf_serving_reads_are_refused(tmp_path):
    request = WarmupRequest("greedy", {"sentences": np.array([b"o gato ."], dtype=object)})
    write_warmup_requests(tmp_path, "m", [request] * MAX_RECORDS)
    with pytest.raises(ValueError, match="at most 1000"):
        write_warmup_requests(tmp_path / "more", "m", [request] * (MAX_RECORDS + 1))
    assert not (tmp_path / "more").exists()


def test_xla_export_loads_with_only_tf_and_tf_text_and_gives_the_graph_exports_ids(
    xla_subprocess,
):
    stdout, stderr = xla_subprocess.communicate(timeout=300)
    assert xla_subprocess.returncode == 0, stderr[-2000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["package_modules"] == []
    assert "Compiled cluster using XLA" in stderr  # the loaded graph ran an XLA cluster
    graph = loaded_export()
    for name in ("serving_default", "greedy"):
        expected = graph.signatures[name](sentences=tf.constant(BATCH))["tokens"].numpy()
        assert result[name] == expected.tolist(), name
    # Untrained, but not constant: the comparison above can fail.
    assert len({tuple(row) for row in result["serving_default"]}) > 1
