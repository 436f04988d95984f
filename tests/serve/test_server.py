"""`tf-transformer serve` over real HTTP: LibreTranslate's own client, JSON lists and
alternatives, every refused input (and the next request served), and concurrent clients."""

import concurrent.futures
import functools
import urllib.error

import pytest

from tests.export_helpers import tiny_run_dir
from tests.serve.running import post, running
from tf_transformer import cli
from tf_transformer.backends import open_translator
from tf_transformer.config import DecodeConfig
from tf_transformer.serve.requests import Limits
from tf_transformer.text.document import translate_document

libretranslatepy = pytest.importorskip("libretranslatepy")

pytestmark = [pytest.mark.slow, pytest.mark.cost(40)]

SENTENCES = ["o gato está na mesa .", "ela comprou um carro novo .", "eu gosto de livros ."]


@functools.cache
def translator():
    """The tiny run, at most 8 tokens a sentence (untrained: its text is arbitrary, fixed)."""
    return open_translator(tiny_run_dir().root, DecodeConfig(max_new_tokens=8, beam_size=2))


def test_libretranslate_client_translates_lists_languages_and_needs_its_key():
    with running(translator()) as (url, _):
        client = libretranslatepy.LibreTranslateAPI(url)
        assert (
            client.translate(SENTENCES[0], "pt", "en") == translator().translate(SENTENCES[:1])[0]
        )
        assert (
            client.translate(SENTENCES[1], "auto", "en")
            == translator().translate(SENTENCES[1:2])[0]
        )
        assert client.languages() == [
            {"code": "pt", "name": "Portuguese", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": []},
        ]
        assert client.detect(SENTENCES[0]) == [{"confidence": 100.0, "language": "pt"}]
    with running(translator(), Limits(api_keys=frozenset({"k1"}))) as (url, _):
        expected = translator().translate(SENTENCES[:1])[0]
        assert (
            libretranslatepy.LibreTranslateAPI(url, "k1").translate(SENTENCES[0], "pt", "en")
            == expected
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            libretranslatepy.LibreTranslateAPI(url, "k2").translate(SENTENCES[0], "pt", "en")
        assert refused.value.code == 403
        assert libretranslatepy.LibreTranslateAPI(url).languages()  # no key needed for that


def test_json_lists_paragraphs_and_alternatives():
    model = translator()
    paragraph = "O gato está na mesa. Ela comprou um carro novo.\n\nEu gosto de livros."
    with running(model) as (url, _):
        status, answer = post(
            f"{url}/translate", {"q": [*SENTENCES, paragraph, ""], "source": "pt", "target": "en"}
        )
        assert status == 200
        assert answer == {
            "translatedText": [
                *model.translate(SENTENCES),
                translate_document(paragraph, model.translate),
                "",
            ]
        }
        status, answer = post(
            f"{url}/translate",
            {"q": SENTENCES[0], "source": "pt", "target": "en", "alternatives": 3},
        )
        best = model.translate_n_best(SENTENCES[:1], 4)[0]
        assert status == 200
        assert answer == {"translatedText": best[0], "alternatives": best[1:]}
        assert best[0] == model.translate(SENTENCES[:1])[0]  # the n-best's first is the answer
        assert len(set(best)) == len(best) <= 4
        status, answer = post(
            f"{url}/translate",
            {
                "q": "<p>O gato <b>está</b> na mesa.</p>",
                "source": "pt",
                "target": "en",
                "format": "html",
            },
        )
        parts = [model.translate([t])[0] for t in ("O gato", "está", "na mesa.")]
        assert (status, answer) == (
            200,
            {"translatedText": "<p>{} <b>{}</b> {}</p>".format(*parts)},
        )


BAD = [
    ({"q": "", "source": "pt", "target": "en"}, 400, "missing q parameter"),
    ({"q": "a" * 401, "source": "pt", "target": "en"}, 400, "exceeds text limit (400)"),
    ({"q": ["a", "b", "c"], "source": "pt", "target": "en"}, 400, "exceeds batch limit (2)"),
    ({"q": "olá", "source": "de", "target": "en"}, 400, "de is not supported"),
    ({"q": "olá", "source": "pt", "target": "fr"}, 400, "fr is not supported"),
    ({"q": "olá", "source": "pt", "target": "en", "alternatives": 9}, 400, "between 0 and 5"),
    ({"q": "olá", "source": "pt", "target": "en", "alternatives": "x"}, 400, "an integer"),
    ({"q": "olá", "source": "pt", "target": "en", "format": "pdf"}, 400, "text or html"),
    (
        {
            "q": "<p>olá<script>alert(1)</script></p>",
            "source": "pt",
            "target": "en",
            "format": "html",
        },
        400,
        "<script> is not translated",
    ),
    (
        {"q": "<i>" * 70 + "olá", "source": "pt", "target": "en", "format": "html"},
        400,
        "nested deeper than 64",
    ),
    (b'{"q": "ol', 400, "the body is not JSON"),
    (b'{"q": "ol\xe1", "source": "pt", "target": "en"}', 400, "the body is not UTF-8"),
    (b"[1, 2]", 400, "must be an object"),
]


def test_bad_input_is_a_4xx_error_and_the_next_request_is_served():
    limits = Limits(char_limit=400, batch_limit=2)
    good = {"q": SENTENCES[0], "source": "pt", "target": "en"}
    with running(translator(), limits) as (url, _):
        for body, status, message in BAD:
            answer = post(f"{url}/translate", body)
            assert answer[0] == status and message in answer[1]["error"], (body, answer)
            assert set(answer[1]) == {"error"}
            assert post(f"{url}/translate", good) == (
                200,
                {"translatedText": translator().translate(SENTENCES[:1])[0]},
            )


def test_concurrent_clients_get_the_serial_answers_in_fewer_backend_calls():
    model = translator()
    subjects, verbs = ("o gato", "ela", "eu", "nós"), ("come .", "vê a mesa .", "compra um carro .")
    requests = [f"{s} {v}" for s in subjects for v in verbs] * 2
    serial = {text: model.translate([text])[0] for text in requests}
    with running(model, max_batch=16) as (url, app):

        def ask(text):
            return post(f"{url}/translate", {"q": text, "source": "pt", "target": "en"})

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, requests))
        calls = app.state.batcher.calls
    assert answers == [(200, {"translatedText": serial[text]}) for text in requests]
    assert calls < len(requests)  # requests shared backend calls


def test_serve_says_what_is_missing_in_one_line(tmp_path, capsys):
    assert cli.main(["serve", str(tmp_path / "nope")]) == 2
    assert "is neither a run directory nor an export" in capsys.readouterr().err
    assert cli.main(["serve", str(tiny_run_dir().root), "--api-keys", str(tmp_path / "k")]) == 2
    assert "--api-keys" in capsys.readouterr().err


def test_a_torn_model_stops_serve_with_one_line(tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    out = tmp_path / "litert"
    assert (
        cli.main(["export", str(tiny_run_dir().root), "--format", "litert", "--out", str(out)]) == 0
    )
    capsys.readouterr()
    encoder = out / "1" / "encoder.tflite"
    encoder.write_bytes(encoder.read_bytes()[:1000])  # a copy cut short
    assert cli.main(["serve", str(out), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{encoder} is damaged" in err


def test_serve_fronts_a_tf_serving_model_alternatives_included():
    from tests.export_helpers import tiny_export
    from tests.serve_export import served_export

    path, _ = tiny_export()
    expected = open_translator(path).translate_n_best(SENTENCES[:1], 3)[0]
    body = {"q": SENTENCES[0], "source": "pt", "target": "en", "alternatives": 2}
    with (
        served_export(path, "rest", "tiny") as (url, _),
        running(open_translator(url, model_name="tiny")) as (ours, _),
    ):
        answer = post(f"{ours}/translate", body)
    assert answer == (200, {"translatedText": expected[0], "alternatives": expected[1:]})
