"""Tests for tf_transformer.backends.savedmodel.grpc_client against a real gRPC server (tests/predict_grpc_server.py)
running the exported SavedModel, and against the REST client on the same model."""

import socket
import time

import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from tests.export_helpers import SENTENCES, loaded_export
from tests.predict_grpc_server import GrpcPredictServer
from tests.predict_server import PredictServer
from tf_transformer import cli
from tf_transformer.backends import open_translator
from tf_transformer.backends.savedmodel.client import ServingError
from tf_transformer.backends.savedmodel.grpc_client import (
    GrpcServingClient,
    grpc_target,
    make_predict_request,
)
from tf_transformer.backends.savedmodel.rest_client import ServingClient
from tf_transformer.backends.savedmodel.server import serving_client
from tf_transformer.config import DecodeConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers():
    """The gRPC and the REST stand-in, serving the same SavedModel as model "tiny"."""
    loaded = loaded_export()
    with GrpcPredictServer(loaded, "tiny") as grpc_server, PredictServer(loaded, "tiny") as rest:
        yield grpc_server, rest


@pytest.fixture
def loaded():
    return loaded_export()


@pytest.fixture
def server(servers):
    return servers[0]


def saved_model_translations(loaded, signature="serving_default", sentences=SENTENCES):
    out = loaded.signatures[signature](sentences=tf.constant(sentences))
    return [t.decode("utf-8") for t in out["translations"].numpy()]


def test_urls_and_request():
    assert grpc_target("grpc://localhost:8500") == "localhost:8500"
    assert grpc_target("localhost:8500/") == "localhost:8500"
    for bad in ("grpc://", "grpc://host:8500/v1/models", "http://host:8500"):
        with pytest.raises(ValueError, match="grpc://HOST:PORT"):
            grpc_target(bad)
    request = make_predict_request(["olá .", "é"], "m", "greedy", version=3)
    assert (request.model_spec.name, request.model_spec.signature_name) == ("m", "greedy")
    assert request.model_spec.version.value == 3
    assert tf.make_ndarray(request.inputs["sentences"]).tolist() == ["olá .".encode(), "é".encode()]
    assert not make_predict_request(["a"], "m").model_spec.HasField("version")
    assert isinstance(serving_client("grpc://h:1", "m"), GrpcServingClient)
    assert isinstance(serving_client("http://h:1", "m"), ServingClient)


@pytest.mark.parametrize("signature", ["serving_default", "greedy"])
def test_translations_equal_the_saved_model_and_rest_in_batches(servers, loaded, signature):
    server, rest_server = servers
    with GrpcServingClient(server.url, "tiny", signature=signature, batch_size=2) as client:
        before = server.requests
        rows = client.predict(SENTENCES)
        assert server.requests - before == 3  # 5 sentences in batches of 2
        assert [row["translations"] for row in rows] == saved_model_translations(loaded, signature)
        rest = ServingClient(rest_server.url, "tiny", signature=signature, batch_size=2)
        assert rows == rest.predict(SENTENCES)  # translations, scores and tokens
        assert client.translate([]) == []
        assert server.requests - before == 3  # nothing to ask


def test_a_version_and_an_unknown_version(server, loaded):
    with GrpcServingClient(server.url, "tiny", version=1) as client:
        assert client.translate(SENTENCES[:1]) == saved_model_translations(
            loaded, sentences=SENTENCES[:1]
        )
    with (
        GrpcServingClient(server.url, "tiny", version=2) as client,
        pytest.raises(ServingError) as error,
    ):
        client.translate(SENTENCES[:1])
    assert str(error.value) == "gRPC NOT_FOUND: Servable not found for request: Specific(tiny, 2)"
    assert error.value.not_found


@pytest.mark.parametrize(
    ("model", "signature", "message"),
    [
        (
            "other",
            "serving_default",
            "gRPC NOT_FOUND: Servable not found for request: Latest(other)",
        ),
        (
            "tiny",
            "nope",
            'gRPC INVALID_ARGUMENT: Serving signature name: "nope" not found in signature def',
        ),
    ],
)
def test_unknown_model_or_signature_is_one_error_line(server, model, signature, message):
    with (
        GrpcServingClient(server.url, model, signature=signature) as client,
        pytest.raises(ServingError) as error,
    ):
        client.translate(["olá ."])
    assert str(error.value) == message


def test_a_bad_input_tensor_is_invalid_argument(server):
    request = make_predict_request(["a"], "tiny")
    request.inputs["sentences"].CopyFrom(tf.make_tensor_proto([1, 2]))
    with GrpcServingClient(server.url, "tiny") as client, pytest.raises(ServingError) as error:
        client._call(request)
    assert error.value.code == "INVALID_ARGUMENT"
    assert "Expects arg[0] to be string but int32 is provided" in str(error.value)


def test_connection_refused_is_a_clear_error():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        GrpcServingClient(f"grpc://127.0.0.1:{port}", "tiny", timeout=5) as client,
        pytest.raises(ServingError, match=rf"^Cannot reach grpc://127.0.0.1:{port}: ") as error,
    ):
        client.translate(["olá ."])
    assert "\n" not in str(error.value)


def test_timeout_is_honoured(server):
    server.delay = 2.0
    try:
        with GrpcServingClient(server.url, "tiny", timeout=0.3) as client:
            start = time.perf_counter()
            with pytest.raises(ServingError, match=r"did not answer within 0.3 s\.$"):
                client.translate(["olá ."])
            assert time.perf_counter() - start < 1.5
    finally:
        server.delay = 0.0


def test_open_translator_takes_a_grpc_url(server, loaded):
    translator = open_translator(
        server.url, model_name="tiny", config=DecodeConfig(beam_size=1), batch_size=4
    )
    assert translator.translate(SENTENCES) == saved_model_translations(loaded, "greedy")
    assert translator.description == (f"TF Serving {server.url}, model tiny (signature greedy)")


def test_translate_command_with_a_grpc_server(server, loaded, capsys):
    code = cli.main(["translate", "--server", server.url, "--model-name", "tiny", *SENTENCES[:2]])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out == saved_model_translations(loaded, sentences=SENTENCES[:2])
    code = cli.main(["translate", "--server", server.url, "--model-name", "other", "olá ."])
    assert code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "gRPC NOT_FOUND: Servable not found for request: Latest(other)" in error
    assert "pass --model-name NAME" in error


def test_the_raw_stub_sees_tf_servings_response(server):
    """The stand-in answers with the served model's spec, as TF Serving does."""
    with GrpcServingClient(server.url, "tiny") as client:
        response = client.stub.Predict(make_predict_request(["olá ."], "tiny"), timeout=30)
    assert isinstance(response, predict_pb2.PredictResponse)
    assert (response.model_spec.name, response.model_spec.version.value) == ("tiny", 1)
    assert set(response.outputs) == {"translations", "scores", "tokens"}
    assert tf.make_ndarray(response.outputs["translations"]).shape == (1,)
