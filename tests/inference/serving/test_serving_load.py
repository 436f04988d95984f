"""Serving under load (issue 31): 8 client threads against the loaded SavedModel, through the REST
and the gRPC stand-ins; bench/serving_load.py runs the same with 200 requests per thread."""

import pytest
import tensorflow as tf

from tests.export_helpers import SENTENCES, loaded_export
from tests.load_driver import request_mix, run_load, serial_answers
from tests.predict_grpc_server import GrpcPredictServer
from tests.predict_server import PredictServer
from tf_transformer.inference.serving import serving_client

pytestmark = pytest.mark.slow

THREADS = 8
REQUESTS_PER_THREAD = 12  # the bench sends 200; a few dozen in all keep the suite quick


@pytest.mark.parametrize("server_class", [PredictServer, GrpcPredictServer], ids=["rest", "grpc"])
def test_answers_under_load_equal_the_serial_answers(server_class):
    loaded = loaded_export()
    cases = request_mix(SENTENCES)
    with (
        server_class(loaded, model_name="tiny") as server,
        serving_client(server.url, "tiny", batch_size=64, timeout=120) as client,
    ):
        expected = serial_answers(client, cases)
        for case in cases:  # the serial answers are the SavedModel's own
            if not case.invalid:
                out = loaded.signatures["serving_default"](sentences=tf.constant(case.sentences))
                texts = [t.decode("utf-8") for t in out["translations"].numpy()]
                assert [row["translations"] for row in expected[case.name]] == texts
        before = server.requests
        result = run_load(
            client, cases, expected, threads=THREADS, requests_per_thread=REQUESTS_PER_THREAD
        )
        assert server.requests - before == THREADS * REQUESTS_PER_THREAD  # none lost or repeated
    assert result.problems == []
    assert (result.errors, result.mismatches) == (0, 0)
    assert result.requests == THREADS * REQUESTS_PER_THREAD
    assert result.refused > 0  # the invalid requests were drawn, and refused as intended
