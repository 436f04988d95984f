"""A REST client for a TF Serving model exported by `backends.savedmodel.export`, and its JSON
format.

The JSON of TF Serving's `:predict` endpoint lives here, in one place, for the client and for
the test server (``tests/predict_server.py``)::

    POST /v1/models/<name>[/versions/<version>]:predict

    row form     {"signature_name": "serving_default", "instances": ["olá .", "obrigado ."]}
      answer     {"predictions": [{"translations": "hello .", "scores": -3.2,
                                   "tokens": [2, 17, 5, 3]}, ...]}
    column form  {"signature_name": "serving_default", "inputs": {"sentences": ["olá ."]}}
      answer     {"outputs": {"translations": ["hello ."], "scores": [-3.2],
                              "tokens": [[2, 17, 5, 3]]}}
    error        HTTP 4xx/5xx with {"error": "..."}

`tokens` rows are padded with PAD (0) to the batch's longest row, START (2) first.

Example:
    >>> client = ServingClient("http://localhost:8501", "transformer", batch_size=16)
    >>> client.translate(["este é um problema que temos que resolver ."])
    ['this is a problem we have to solve .']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import requests

from tf_transformer.backends.savedmodel.client import BatchingClient, ServingError
from tf_transformer.errors import InvalidValueError

INPUT_NAME = "sentences"
OUTPUT_NAMES = ("translations", "scores", "tokens")
FORMS = ("instances", "inputs")


def predict_path(model_name: str, version: int | None = None) -> str:
    """The URL path of the `:predict` endpoint, e.g. ``/v1/models/transformer:predict``."""
    if version is None:
        return f"/v1/models/{model_name}:predict"
    return f"/v1/models/{model_name}/versions/{int(version)}:predict"


def make_request(
    sentences: Sequence[str], signature: str = "serving_default", form: str = "instances"
) -> dict[str, Any]:
    """The JSON body of a `:predict` request for a batch of source sentences.

    Args:
        sentences: Portuguese sentences.
        signature: the SavedModel signature to run (`serving_default`, `greedy`).
        form: "instances" (TF Serving's row format) or "inputs" (column format).

    Returns:
        A JSON-serialisable dict.
    """
    if form not in FORMS:
        raise InvalidValueError(f"form must be one of {FORMS}, got {form!r}.")
    sentences = [str(s) for s in sentences]
    if form == "instances":
        return {"signature_name": signature, "instances": sentences}
    return {"signature_name": signature, "inputs": {INPUT_NAME: sentences}}


def parse_request(payload: Any) -> tuple[str, list[str], str]:
    """Reads a `:predict` request body (server side): `(signature, sentences, form)`.

    Accepts what `make_request` writes, plus TF Serving's other spellings of one input:
    ``{"instances": [{"sentences": "..."}]}`` and ``{"inputs": [...]}``.

    Raises:
        ValueError: with a TF Serving-like message for anything else.
    """
    if not isinstance(payload, dict):
        raise InvalidValueError("JSON Value: request body must be a JSON object.")
    signature = payload.get("signature_name", "serving_default")
    if not isinstance(signature, str):
        raise InvalidValueError("'signature_name' must be a string.")
    if ("instances" in payload) == ("inputs" in payload):
        raise InvalidValueError("Missing 'instances' or 'inputs' key (exactly one is required).")
    if "instances" in payload:
        form, values = "instances", payload["instances"]
        if not isinstance(values, list):
            raise InvalidValueError("'instances' must be a list.")
        values = [v[INPUT_NAME] if isinstance(v, dict) and INPUT_NAME in v else v for v in values]
    else:
        form, values = "inputs", payload["inputs"]
        if isinstance(values, dict):
            if set(values) != {INPUT_NAME}:
                raise InvalidValueError(f"'inputs' must have exactly the key {INPUT_NAME!r}.")
            values = values[INPUT_NAME]
        if not isinstance(values, list):
            raise InvalidValueError(f"'{INPUT_NAME}' must be a list of strings.")
    if not all(isinstance(v, str) for v in values):
        raise InvalidValueError(f"Expecting each '{INPUT_NAME}' value to be a string.")
    return signature, values, form


def make_response(outputs: dict[str, Any], form: str = "instances") -> dict[str, Any]:
    """The JSON answer to a `:predict` request (server side), as TF Serving writes it.

    Args:
        outputs: output name -> batch-major value (numpy arrays or nested lists; bytes are
            decoded as UTF-8).
        form: the request's form: rows (`predictions`) for "instances", columns (`outputs`)
            for "inputs".
    """
    columns = {name: _to_json(value) for name, value in outputs.items()}
    if form == "inputs":
        return {"outputs": columns}
    sizes = {len(column) for column in columns.values()}
    if len(sizes) > 1:
        raise InvalidValueError("Row format needs outputs with the same batch size.")
    rows = sizes.pop() if sizes else 0
    return {"predictions": [{name: col[i] for name, col in columns.items()} for i in range(rows)]}


def parse_response(payload: Any) -> list[dict[str, Any]]:
    """Reads a `:predict` answer in either form into one dict of outputs per sentence.

    Raises:
        ServingError: for an `error` answer or a body of neither form.
    """
    if isinstance(payload, dict) and "error" in payload:
        raise ServingError(str(payload["error"]))
    if isinstance(payload, dict) and isinstance(payload.get("predictions"), list):
        rows = payload["predictions"]
        # One output: TF Serving writes the bare values.
        return [row if isinstance(row, dict) else {OUTPUT_NAMES[0]: row} for row in rows]
    if isinstance(payload, dict) and "outputs" in payload:
        columns = payload["outputs"]
        if not isinstance(columns, dict):
            columns = {OUTPUT_NAMES[0]: columns}
        sizes = {len(column) for column in columns.values()}
        if len(sizes) > 1:
            raise ServingError("Malformed answer: outputs of different batch sizes.")
        rows = sizes.pop() if sizes else 0
        return [{name: col[i] for name, col in columns.items()} for i in range(rows)]
    raise ServingError(f"Malformed answer: neither 'predictions' nor 'outputs': {payload!r:.200}")


def _to_json(value: Any) -> Any:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


class ServingClient(BatchingClient):
    """Translates through TF Serving's REST API (`:predict`), in batches.

    For gRPC (``grpc://host:8500``) see `tf_transformer.backends.savedmodel.grpc_client`;
    `tf_transformer.backends.savedmodel.server.serving_client` picks by the URL's scheme.

    Args:
        url: the server's base URL, e.g. ``http://localhost:8501``.
        model_name: the served model's name.
        form: "instances" (row) or "inputs" (column) request format.
        session: an optional `requests.Session` (connection reuse, custom adapters). Without
            one, each thread gets its own: `requests` does not promise a shared session is
            thread-safe.
        **settings: `version`, `signature`, `timeout` (bounds the connection and the answer)
            and `batch_size`, as `BatchingClient` takes them.
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        *,
        form: str = "instances",
        session: requests.Session | None = None,
        **settings,
    ):
        super().__init__(model_name, **settings)
        if form not in FORMS:
            raise InvalidValueError(f"form must be one of {FORMS}, got {form!r}.")
        self.url = url.rstrip("/")
        if "://" not in self.url:
            self.url = "http://" + self.url
        self.form = form
        self._session = session
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        """The session given, or this thread's own."""
        if self._session is not None:
            return self._session
        if not hasattr(self._local, "session"):
            self._local.session = requests.Session()
        return self._local.session

    @property
    def predict_url(self) -> str:
        return self.url + predict_path(self.model_name, self.version)

    def _predict_batch(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return self._post(make_request(sentences, self.signature, self.form))

    def _post(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        url = self.predict_url
        try:
            answer = self.session.post(url, json=body, timeout=self.timeout)
        except requests.Timeout:
            raise ServingError(f"{url} did not answer within {self.timeout} s.") from None
        except requests.ConnectionError as error:
            raise ServingError(f"Cannot reach {url}: {_reason(error)}") from None
        except requests.RequestException as error:
            raise ServingError(f"Request to {url} failed: {error}") from None
        try:
            payload = answer.json()
        except ValueError:
            payload = None
        if answer.status_code != 200:
            message = payload.get("error") if isinstance(payload, dict) else None
            raise ServingError(message or answer.text[:500] or answer.reason, answer.status_code)
        if payload is None:
            raise ServingError(f"{url} answered 200 with a body that is not JSON.")
        return parse_response(payload)


def _reason(error: BaseException) -> str:
    """A short cause of a connection error, e.g. "[Errno 111] Connection refused"."""
    text = str(error)
    match = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    return match.group(0).strip() if match else text[:300]
