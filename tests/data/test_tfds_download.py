"""The real `tfds.load` download path of `ted_hrlr`, through the CLI, with no mock of TFDS.

A fresh TFDS data_dir and proxies that lead nowhere: TFDS builds the dataset (which needs
`importlib_resources`), tries to download the dead URL, fails, and the CLI prints one line.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tf_transformer.data.ted_tarball import DEAD_URL

pytestmark = [pytest.mark.slow, pytest.mark.cost(30)]  # seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[2]


class _NotFound(BaseHTTPRequestHandler):
    """A proxy that answers 404 to everything, as the dead server does."""

    def do_GET(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_train(tmp_path: Path, name: str, proxy: str) -> subprocess.Popen:
    env = {
        key: value
        for key, value in os.environ.items()
        if key.lower() not in ("no_proxy", "http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        HTTP_PROXY=proxy,
        HTTPS_PROXY=proxy,
        http_proxy=proxy,
        https_proxy=proxy,
        TFDS_DATA_DIR=str(tmp_path / "tfds_default"),
        PYTHONPATH=str(REPO_ROOT),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    command = ["train", "--dataset", "ted_hrlr", "--data-dir", str(tmp_path / name / "tfds")]
    command += ["--run-dir", str(tmp_path / name / "run"), "--quiet"]
    return subprocess.Popen(
        [sys.executable, "-m", "tf_transformer.cli", *command],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_train_ted_hrlr_offline_is_one_error_line_exit_2(tmp_path):
    not_found = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=not_found.serve_forever, daemon=True).start()
    start = time.monotonic()
    try:
        processes = {  # both at once: each is mostly TensorFlow's import
            "unreachable": _start_train(
                tmp_path, "unreachable", f"http://127.0.0.1:{_closed_port()}"
            ),
            "dead": _start_train(tmp_path, "dead", f"http://127.0.0.1:{not_found.server_port}"),
        }
        results = {
            name: (p.communicate(timeout=240), p.returncode) for name, p in processes.items()
        }
    finally:
        not_found.shutdown()
        not_found.server_close()
    # TFDS alone retries 10 times with exponential backoff: 3.5 minutes without a network.
    assert time.monotonic() - start < 90
    causes = {"unreachable": "ProxyError: [Errno 111] Connection refused", "dead": "HTTP code: 404"}
    for name, ((stdout, stderr), code) in results.items():
        assert code == 2, stderr
        assert "Traceback" not in stderr
        lines = [line for line in stderr.splitlines() if line.startswith("tf-transformer")]
        assert len(lines) == 1, stderr
        line = lines[0]
        assert line.startswith("tf-transformer train: error: cannot get the TED data through TFDS")
        assert DEAD_URL in line and "--tarball PATH" in line
        assert causes[name] in line  # TFDS really tried the download
        assert (tmp_path / name / "tfds" / "downloads").is_dir()
        assert not (tmp_path / name / "run").exists()
        assert not (tmp_path / "tfds_default").exists()  # --data-dir was used
