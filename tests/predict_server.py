"""A stand-in for TF Serving's REST `:predict` endpoint, on top of a real loaded SavedModel.

The TF Serving binary cannot be installed here, so tests talk real HTTP to this server instead.
It speaks the JSON of `tf_transformer.inference.serving` (the same functions the client uses) and answers
like TF Serving: 200 with `predictions`/`outputs`, 400 with `{"error": ...}` for bad input, 404
for an unknown model, version or path.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import tensorflow as tf

from tf_transformer.inference.serving import make_response, parse_request

_PREDICT = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


class PredictServer:
    """Serves `loaded` (a `tf.saved_model.load` result) as model `model_name`, version `version`.

    Use as a context manager; `url` is the base URL. `delay` (seconds) is slept before each
    answer, to test client timeouts.
    """

    def __init__(self, loaded, model_name: str = "transformer", version: int = 1):
        self.loaded = loaded
        self.model_name = model_name
        self.version = version
        self.delay = 0.0
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
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
        if name != self.model_name:
            return 404, {"error": f"Servable not found for request: Latest({name})"}
        if version is not None and int(version) != self.version:
            return 404, {"error": f"Servable not found for request: Specific({name}, {version})"}
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            return 400, {"error": f"JSON Parse error: {error}"}
        try:
            signature, sentences, form = parse_request(payload)
        except ValueError as error:
            return 400, {"error": str(error)}
        if signature not in self.loaded.signatures:
            return 400, {
                "error": f'Serving signature name: "{signature}" not found in signature def'
            }
        outputs = self.loaded.signatures[signature](sentences=tf.constant(sentences, tf.string))
        return 200, make_response({k: v.numpy() for k, v in outputs.items()}, form)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                server.requests += 1
                match = _PREDICT.match(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server.delay:
                    time.sleep(server.delay)
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
