"""Tests for tf_transformer.backends.savedmodel.rest_client: the JSON format, and the client against a real HTTP server
(tests/predict_server.py) running the exported SavedModel."""

import socket
import time

import pytest
import requests
import tensorflow as tf

from tests.export_helpers import SENTENCES, loaded_export
from tests.predict_server import PredictServer
from tf_transformer import cli
from tf_transformer.backends.savedmodel.client import ServingError
from tf_transformer.backends.savedmodel.rest_client import (
    ServingClient,
    make_request,
    make_response,
    parse_request,
    parse_response,
    predict_path,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loaded():
    return loaded_export()


@pytest.fixture(scope="module")
def server(loaded):
    with PredictServer(loaded, model_name="tiny", version=1) as server:
        yield server


@pytest.fixture
def expected(loaded):
    def run(signature="serving_default", sentences=SENTENCES):
        out = loaded.signatures[signature](sentences=tf.constant(sentences))
        return [t.decode("utf-8") for t in out["translations"].numpy()], out

    return run


def test_request_and_response_formats():
    assert predict_path("m") == "/v1/models/m:predict"
    assert predict_path("m", 3) == "/v1/models/m/versions/3:predict"
    rows = make_request(["a", "b"], "greedy")
    assert rows == {"signature_name": "greedy", "instances": ["a", "b"]}
    columns = make_request(["a"], form="inputs")
    assert columns == {"signature_name": "serving_default", "inputs": {"sentences": ["a"]}}
    assert parse_request(rows) == ("greedy", ["a", "b"], "instances")
    assert parse_request(columns) == ("serving_default", ["a"], "inputs")
    assert parse_request({"instances": [{"sentences": "x"}]}) == (
        "serving_default",
        ["x"],
        "instances",
    )
    for bad in ([], {"instances": [1]}, {"inputs": {"other": ["a"]}}, {}, {"instances": "a"}):
        with pytest.raises(ValueError):
            parse_request(bad)

    outputs = {"translations": [b"hi .", b"yes ."], "scores": [-1.5, -2.0], "tokens": [[2, 3]] * 2}
    by_row = make_response(outputs)
    assert by_row == {
        "predictions": [
            {"translations": "hi .", "scores": -1.5, "tokens": [2, 3]},
            {"translations": "yes .", "scores": -2.0, "tokens": [2, 3]},
        ]
    }
    by_column = make_response(outputs, "inputs")
    assert by_column["outputs"]["translations"] == ["hi .", "yes ."]
    assert parse_response(by_row) == parse_response(by_column) == by_row["predictions"]
    assert parse_response({"predictions": ["a"]}) == [{"translations": "a"}]
    with pytest.raises(ServingError, match="broken"):
        parse_response({"error": "broken"})
    with pytest.raises(ServingError, match="Malformed"):
        parse_response({"something": 1})


def test_server_answers_like_tf_serving(server, expected):
    texts, out = expected(sentences=SENTENCES[:2])
    url = server.url + predict_path("tiny")
    rows = requests.post(url, json={"instances": SENTENCES[:2]}, timeout=30).json()
    assert [row["translations"] for row in rows["predictions"]] == texts
    assert rows["predictions"][0]["tokens"] == out["tokens"].numpy()[0].tolist()
    assert rows["predictions"][0]["scores"] == pytest.approx(float(out["scores"][0]))
    columns = requests.post(url, json={"inputs": {"sentences": SENTENCES[:2]}}, timeout=30)
    assert columns.json()["outputs"]["translations"] == texts
    bad = requests.post(url, json={"instances": [1, 2]}, timeout=30)
    assert bad.status_code == 400 and "string" in bad.json()["error"]


@pytest.mark.parametrize(
    ("signature", "form"), [("serving_default", "instances"), ("greedy", "inputs")]
)
def test_client_translations_equal_the_saved_model(server, expected, signature, form):
    client = ServingClient(server.url, "tiny", signature=signature, form=form, batch_size=2)
    before = server.requests
    assert client.translate(SENTENCES) == expected(signature)[0]
    assert server.requests - before == 3  # 5 sentences in batches of 2
    assert client.translate([]) == []
    assert server.requests - before == 3  # nothing to ask


def test_client_with_a_version(server, expected):
    assert (
        ServingClient(server.url, "tiny", version=1).translate(SENTENCES[:1])
        == (expected(sentences=SENTENCES[:1])[0])
    )
    with pytest.raises(ServingError, match="Servable not found") as error:
        ServingClient(server.url, "tiny", version=2).translate(SENTENCES[:1])
    assert error.value.status == 404


def test_non_200_is_a_clear_error_with_the_server_message(server):
    client = ServingClient(server.url, "tiny", signature="nope")
    with pytest.raises(ServingError) as error:
        client.translate(["olá ."])
    assert error.value.status == 400
    assert str(error.value) == 'HTTP 400: Serving signature name: "nope" not found in signature def'


def test_connection_refused_is_a_clear_error():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ServingClient(f"http://127.0.0.1:{port}", "tiny", timeout=5)
    with pytest.raises(ServingError, match=r"Cannot reach .*:predict: \[Errno 111\] Connection"):
        client.translate(["olá ."])


def test_timeout_is_honoured(server):
    server.delay = 2.0
    try:
        client = ServingClient(server.url, "tiny", timeout=0.3)
        start = time.perf_counter()
        with pytest.raises(ServingError, match=r"did not answer within 0.3 s"):
            client.translate(["olá ."])
        assert time.perf_counter() - start < 1.5
    finally:
        server.delay = 0.0


def test_translate_command_with_server(server, expected, capsys):
    code = cli.main(["translate", "--server", server.url, "--model-name", "tiny", *SENTENCES[:2]])
    assert code == 0
    assert capsys.readouterr().out.splitlines() == expected(sentences=SENTENCES[:2])[0]
    code = cli.main(["translate", "--server", server.url, "--model-name", "other", "olá ."])
    assert code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "HTTP 404: Servable not found" in error
