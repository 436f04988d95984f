"""A real `tf-transformer serve` app on a loopback port, in a thread of the test process, and
plain HTTP calls to it (urllib: what LibreTranslate's clients use)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request

import uvicorn

from tf_transformer.serve.app import make_app


@contextlib.contextmanager
def running(translator, limits=None, **batching):
    """Yields `(url, app)` while uvicorn serves `make_app(translator, ...)` on a free port."""
    app = make_app(translator, limits, **batching)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(30)


def post(url: str, body: bytes | dict | None = None, content_type="application/json", method=None):
    """`(status, answer)`: the JSON answer of a request, whatever its status."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(url, data=data, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
