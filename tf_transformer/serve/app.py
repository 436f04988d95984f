"""The ASGI app of `tf-transformer serve`: LibreTranslate's API and a page to try the model.

Routes:

- `POST /translate` (and GET): LibreTranslate's translate (`requests.parse_translate`);
- `GET /languages`, `GET /frontend/settings`: LibreTranslate's; `POST /detect` answers the
  model's one source language (no detection is run);
- `POST /attention`: the last decoder layer's cross-attention of one sentence (run
  directories and SavedModels; the page draws it);
- `GET /`: the page (`static/`: no CDN, it works offline).

Every refused request is LibreTranslate's `{"error": "..."}` with a 4xx status; a failure of
the backend is a 500 of the same shape, and the next request is served.
"""

from __future__ import annotations

import contextlib
import importlib.resources

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tf_transformer.errors import InvalidValueError
from tf_transformer.serve.batcher import Batcher, Busy, TimedOut
from tf_transformer.serve.documents import translate_texts
from tf_transformer.serve.requests import (
    MAX_ALTERNATIVES,
    Limits,
    RequestError,
    check_key,
    parse_translate,
    read_body,
)

# LibreTranslate's names for the languages a model of ours may translate.
NAMES = {
    "pt": "Portuguese",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "it": "Italian",
}


def make_app(translator, limits: Limits | None = None, **batching) -> Starlette:
    """The app serving `translator` (an `open_translator` result).

    Args:
      translator: what `backends.open_translator` returns.
      limits: the request limits and API keys (`requests.Limits`).
      **batching: `Batcher`'s `max_batch`, `max_queue` and `timeout`.
    """
    limits = limits or Limits()
    languages = (translator.source_lang, translator.target_lang)
    batcher = Batcher(translator, **batching)

    def language(code: str, targets: list[str]) -> dict:
        return {"code": code, "name": NAMES.get(code, code), "targets": targets}

    async def translate(request: Request):
        body = await read_body(request)
        check_key(body, limits)
        parsed = parse_translate(body, limits, languages)
        try:
            texts, others = await translate_texts(
                parsed.texts,
                html=parsed.html,
                alternatives=parsed.alternatives,
                language=languages[0],
                translate=batcher.translate,
            )
        except InvalidValueError as error:  # the HTML, or a setting the backend cannot honour
            raise RequestError(400, str(error)) from None
        answer = {"translatedText": texts if parsed.batch else texts[0]}
        if parsed.alternatives:
            answer["alternatives"] = others if parsed.batch else others[0]
        if parsed.source == "auto":  # one language in: it is the model's
            detected = {"confidence": 100.0, "language": languages[0]}
            answer["detectedLanguage"] = [detected] * len(texts) if parsed.batch else detected
        return JSONResponse(answer)

    async def detect(request: Request):
        # One source language: it is the answer (the docs say so); no detection is run.
        body = await read_body(request)
        check_key(body, limits)
        return JSONResponse([{"confidence": 100.0, "language": languages[0]}])

    async def list_languages(request: Request):
        source, target = languages
        return JSONResponse([language(source, [target]), language(target, [])])

    async def settings(request: Request):
        source, target = languages
        return JSONResponse(
            {
                "charLimit": limits.char_limit,
                "batchLimit": limits.batch_limit,
                "frontendTimeout": 500,
                "apiKeys": bool(limits.api_keys),
                "keyRequired": bool(limits.api_keys),
                "suggestions": False,
                "filesTranslation": False,
                "supportedFilesFormat": [],
                "maxAlternatives": MAX_ALTERNATIVES,
                "attention": can_plot(translator),
                "model": translator.description,
                "language": {
                    "source": {"code": source, "name": NAMES.get(source, source)},
                    "target": {"code": target, "name": NAMES.get(target, target)},
                },
            }
        )

    async def attention(request: Request):
        body = await read_body(request)
        check_key(body, limits)
        sentence = body.get("q")
        if not isinstance(sentence, str) or not sentence.strip():
            raise RequestError(400, "Invalid request: missing q parameter")
        if limits.char_limit != -1 and len(sentence) > limits.char_limit:
            raise RequestError(400, f"Invalid request: q exceeds text limit ({limits.char_limit})")
        try:
            weights, source, target = await batcher.run(translator.attention, sentence)
        except InvalidValueError as error:
            raise RequestError(400, str(error)) from None
        weights = np.round(np.asarray(weights, np.float32), 4).tolist()
        return JSONResponse({"weights": weights, "source": source, "target": target})

    async def refused(request: Request, error: RequestError):
        return JSONResponse({"error": error.message}, status_code=error.status)

    async def busy(request: Request, error: Busy):
        return JSONResponse({"error": f"Server busy: {error}"}, status_code=503)

    async def timed_out(request: Request, error: TimedOut):
        return JSONResponse({"error": f"Timed out: {error}"}, status_code=504)

    async def failed(request: Request, error: Exception):
        return JSONResponse({"error": f"{type(error).__name__}: {error}"}, status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        batcher.close()

    static = importlib.resources.files("tf_transformer.serve") / "static"
    app = Starlette(
        routes=[
            Route("/translate", translate, methods=["GET", "POST"]),
            Route("/languages", list_languages, methods=["GET", "POST"]),
            Route("/detect", detect, methods=["POST"]),
            Route("/frontend/settings", settings, methods=["GET"]),
            Route("/attention", attention, methods=["POST"]),
            Mount("/", StaticFiles(directory=str(static), html=True)),
        ],
        exception_handlers={
            RequestError: refused,
            Busy: busy,
            TimedOut: timed_out,
            Exception: failed,
        },
        lifespan=lifespan,
    )
    app.state.batcher = batcher
    return app


def can_plot(translator) -> bool:
    """Whether `translator` has attention maps (the TensorFlow model: run dir, SavedModel)."""
    from tf_transformer.backends.base import BaseTranslator

    return type(translator).attention is not BaseTranslator.attention
