"""Serving under load (issues 31, 37): 8 client threads against a trained tiny model's
SavedModel, served from a process of its own with TensorFlow's thread pools (so that model runs
of several requests overlap), through the REST and gRPC stand-ins and the client's own batching;
bench/serving_load.py runs the same with 200 requests per thread."""

import pytest
import tensorflow as tf

from tests.export_helpers import trained_export
from tests.load_driver import request_mix, run_load, serial_answers
from tests.serve_export import served_export
from tf_transformer.backends.savedmodel.server import serving_client
from tf_transformer.data.sample import sample_pairs

pytestmark = pytest.mark.slow

THREADS = 8
REQUESTS_PER_THREAD = 12  # the bench sends 200; a few dozen in all keep the suite quick
# The client's: batches of 8 and 16 and the awkward one (6 sentences) take several requests.
BATCH_SIZE = 4
SENTENCES = [pt for pt, _ in sample_pairs("train", size=5)]  # sentences it was trained on


@pytest.fixture(scope="module")
def trained():
    """The trained export, and each valid case's translations by the SavedModel itself."""
    path = trained_export()
    loaded = tf.saved_model.load(str(path))
    own = {}
    for case in request_mix(SENTENCES):
        if not case.invalid:
            out = loaded.signatures["serving_default"](sentences=tf.constant(case.sentences))
            own[case.name] = [t.decode("utf-8") for t in out["translations"].numpy()]
    return path, own


def test_distinct_sentences_get_distinct_translations(trained):
    """So that answers swapped between requests, or rows within one, cannot go unseen."""
    _, own = trained
    by_sentence = {}
    for case in request_mix(SENTENCES):
        if not case.invalid:
            by_sentence.update(zip(case.sentences, own[case.name]))
    texts = [text for sentence, text in by_sentence.items() if sentence.strip()]
    assert len(texts) == len(SENTENCES) + 2  # and 10,000 "a"s, and the emoji sentence
    assert len(set(texts)) == len(texts), by_sentence


@pytest.mark.parametrize("kind", ["rest", "grpc"])
def test_answers_under_load_equal_the_serial_answers(trained, kind):
    path, own = trained
    cases = request_mix(SENTENCES)
    with (
        served_export(path, kind, "trained") as (url, report),
        serving_client(url, "trained", batch_size=BATCH_SIZE, timeout=120) as client,
    ):
        expected = serial_answers(client, cases)
        # The serial answers are the SavedModel's own.
        assert {
            name: [row["translations"] for row in rows] for name, rows in expected.items()
        } == own
        result = run_load(
            client, cases, expected, threads=THREADS, requests_per_thread=REQUESTS_PER_THREAD
        )
    assert result.problems == []
    assert (result.errors, result.mismatches) == (0, 0)
    assert result.requests == THREADS * REQUESTS_PER_THREAD
    assert result.refused > 0  # the invalid requests were drawn, and refused as intended
    serial = sum(case.requests(BATCH_SIZE) for case in cases if not case.invalid)
    assert result.sent > result.requests  # some cases took several of the client's batches
    assert report["requests"] == serial + result.sent  # none lost or repeated
    assert report["most_running"] > 1  # the server ran the model for several requests at once
