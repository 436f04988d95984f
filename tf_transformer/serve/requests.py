"""LibreTranslate's `/translate` request: read from JSON or a form, checked, one error line.

The fields (https://libretranslate.com/docs): `q` (a string or a list of strings), `source`
(a language code or "auto"), `target`, `format` ("text" or "html"), `alternatives` (how many
other translations), `api_key`. LibreTranslate's clients send JSON or form-encoded bodies
(`libretranslatepy` sends a form; a list `q` then comes as a JSON text or as repeated fields).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

MAX_ALTERNATIVES = 5


class RequestError(Exception):
    """A request the server refuses: the HTTP status and LibreTranslate's `{"error": ...}`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's limits, as LibreTranslate's flags (-1: none).

    Attributes:
      char_limit: the most characters of text a request may hold (`--char-limit`).
      batch_limit: the most texts a list `q` may hold (`--batch-limit`).
      api_keys: the keys that may translate; empty: no key needed (`--api-keys FILE`).
    """

    char_limit: int = 5000
    batch_limit: int = -1
    api_keys: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class TranslateRequest:
    """A checked `/translate` request."""

    texts: list[str]
    batch: bool  # `q` was a list: answer with lists
    source: str
    html: bool
    alternatives: int


async def read_body(request) -> dict[str, Any]:
    """The request's fields from a JSON body, a form, or (GET) the query string."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, "Invalid request: the body is not UTF-8") from None
    if content_type == "application/json" or (not content_type and text.lstrip()[:1] == "{"):
        try:
            body = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as error:
            raise RequestError(
                400, f"Invalid request: the body is not JSON ({error.msg})"
            ) from None
        if not isinstance(body, dict):
            raise RequestError(400, "Invalid request: the JSON body must be an object")
        return body
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        return {key: _form_value(form.getlist(key)) for key in form}
    return dict(request.query_params)


def _form_value(values: list) -> Any:
    """A form field: one value, or a list when it repeats."""
    return values[0] if len(values) == 1 else values


def check_key(body: dict[str, Any], limits: Limits) -> None:
    """LibreTranslate's 403 for a missing or unknown `api_key`, when keys are required."""
    if limits.api_keys and body.get("api_key") not in limits.api_keys:
        raise RequestError(403, "Invalid API key")


def parse_translate(body: dict[str, Any], limits: Limits, languages: tuple[str, str]):
    """The checked `TranslateRequest`, or `RequestError` with LibreTranslate's wording."""
    source_lang, target_lang = languages
    q = body.get("q")
    if isinstance(q, str) and q.lstrip().startswith("["):  # a list sent as a form field
        try:
            q = json.loads(q)
        except json.JSONDecodeError:
            pass  # a text that starts with "[": translate it as it is
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if q is None or (not batch and not q.strip()) or (batch and not q):
        raise RequestError(400, "Invalid request: missing q parameter")
    if not all(isinstance(text, str) for text in texts):
        raise RequestError(400, "Invalid request: q must be a string or a list of strings")
    if batch and limits.batch_limit != -1 and len(texts) > limits.batch_limit:
        raise RequestError(
            400,
            f"Invalid request: request ({len(texts)}) exceeds batch limit ({limits.batch_limit})",
        )
    chars = sum(len(text) for text in texts)
    if limits.char_limit != -1 and chars > limits.char_limit:
        raise RequestError(
            400, f"Invalid request: request ({chars}) exceeds text limit ({limits.char_limit})"
        )
    source = body.get("source")
    target = body.get("target")
    if not source:
        raise RequestError(400, "Invalid request: missing source parameter")
    if not target:
        raise RequestError(400, "Invalid request: missing target parameter")
    if source not in ("auto", source_lang):
        raise RequestError(400, f"{source} is not supported: this model translates {source_lang}")
    if target != target_lang:
        raise RequestError(
            400, f"{target} is not supported: this model translates to {target_lang}"
        )
    fmt = body.get("format") or "text"
    if fmt not in ("text", "html"):
        raise RequestError(400, f"Invalid request: format must be text or html, not {fmt!r}")
    alternatives = body.get("alternatives") or 0
    try:
        alternatives = int(alternatives)
    except (TypeError, ValueError):
        raise RequestError(400, "Invalid request: alternatives must be an integer") from None
    if not 0 <= alternatives <= MAX_ALTERNATIVES:
        raise RequestError(
            400, f"Invalid request: alternatives must be between 0 and {MAX_ALTERNATIVES}"
        )
    return TranslateRequest(texts, batch, source, fmt == "html", alternatives)
