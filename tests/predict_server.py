"""A stand-in for TF Serving's REST `:predict` endpoint, on top of a real loaded SavedModel.

The TF Serving binary cannot be installed here, so tests talk real HTTP to this server instead.
It speaks the JSON of `tf_transformer.backends.savedmodel.rest_client` (the same functions the client uses) and answers
like TF Serving: 200 with `predictions`/`outputs`, 400 with `{"error": ...}` for bad input, 404
for an unknown model, version or path. `ServedModel` (which model, which signature, running it)
is shared with the gRPC stand-in, tests/predict_grpc_server.py.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import tensorflow as tf

from tf_transformer.backends.savedmodel.rest_client import make_response, parse_request

_PREDICT = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


class _Server(ThreadingHTTPServer):
    # The standard library listens with a backlog of 5: more clients connecting at once are
    # dropped and retry the handshake after a second (p99 latency of ~1 s under 8 threads).
    # TF Serving's server takes far more.
    request_queue_size = 128
    daemon_threads = True


class ServedModel:
    """`loaded` (a `tf.saved_model.load` result) served as model `model_name`, version `version`,
    with TF Serving's messages for an unknown model, version or signature.

    `delay` (seconds) is slept before each answer, to test client timeouts; `requests` counts
    the requests received (from any number of server threads); `most_running` is the most
    model runs that were under way at once.
    """

    def __init__(self, loaded, model_name: str = "transformer", version: int = 1):
        self.loaded = loaded
        self.model_name = model_name
        self.version = version
        self.delay = 0.0
        self.requests = 0
        self.running = self.most_running = 0
        self._lock = threading.Lock()

    def received(self) -> None:
        """Counts one request and sleeps `delay` (`+=` from several threads would lose counts)."""
        with self._lock:
            self.requests += 1
        if self.delay:
            time.sleep(self.delay)

    def missing(self, name: str, version: int | str | None) -> str | None:
        """TF Serving's message when it serves no model `name` (version `version`), else None."""
        if name != self.model_name:
            return f"Servable not found for request: Latest({name})"
        if version is not None and int(version) != self.version:
            return f"Servable not found for request: Specific({name}, {version})"
        return None

    def unknown_signature(self, signature: str) -> str | None:
        """TF Serving's message when the SavedModel has no `signature`, else None."""
        if signature not in self.loaded.signatures:
            return f'Serving signature name: "{signature}" not found in signature def'
        return None

    def run(self, signature: str, sentences) -> dict:
        """The signature's outputs (numpy) for a list or 1-D array of sentences."""
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            outputs = self.loaded.signatures[signature](sentences=tf.constant(sentences, tf.string))
            return {k: v.numpy() for k, v in outputs.items()}
        finally:
            with self._lock:
                self.running -= 1


class PredictServer(ServedModel):
    """Serves `loaded` over REST as model `model_name`, version `version` (`ServedModel`).

    Use as a context manager; `url` is the base URL.
    """

    def __init__(self, loaded, model_name: str = "transformer", version: int = 1):
        super().__init__(loaded, model_name, version)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def predict(self, body: bytes, name: str, version: str | None) -> tuple[int, dict]:
        """The status and JSON answer for one `:predict` request."""
        missing = self.missing(name, version)
        if missing:
            return 404, {"error": missing}
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            return 400, {"error": f"JSON Parse error: {error}"}
        try:
            signature, sentences, form = parse_request(payload)
        except ValueError as error:
            return 400, {"error": str(error)}
        unknown = self.unknown_signature(signature)
        if unknown:
            return 400, {"error": unknown}
        return 200, make_response(self.run(signature, sentences), form)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as TF Serving: a client reuses its connection.
            protocol_version = "HTTP/1.1"
            # Headers and body leave in two writes; with Nagle's algorithm the body waits for
            # the client's delayed ACK of the headers (~40 ms per request on a kept-alive
            # connection).
            disable_nagle_algorithm = True

            def do_POST(self):
                match = _PREDICT.match(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.received()
                if match is None:
                    status, answer = 404, {"error": f"Malformed request: POST {self.path}"}
                else:
                    status, answer = server.predict(body, *match.groups())
                data = json.dumps(answer).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def log_message(self, *args):  # keep test output quiet
                pass

        return Handler
