"""Serves a SavedModel from a process of its own, through the REST or the gRPC stand-in, with
TensorFlow's own thread pools (the test process may be held to one thread: tests/conftest.py).

    python -m tests.serve_export SAVED_MODEL_DIR {rest,grpc} MODEL_NAME

It prints the server's URL on a line, serves until its stdin closes, then prints one JSON line,
`{"requests": ..., "most_running": ...}` (see `ServedModel`), and exits. `served_export` runs
it from a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
THREADS = "4"  # per TensorFlow pool: model runs of several requests really overlap


@contextlib.contextmanager
def served_export(path: str | Path, kind: str, model_name: str) -> Iterator[tuple[str, dict]]:
    """Serves `path` from a child process: yields its URL and a dict that holds the child's
    final report once the block has ended (the server stopped)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.update(TF_NUM_INTRAOP_THREADS=THREADS, TF_NUM_INTEROP_THREADS=THREADS)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.serve_export", str(path), kind, model_name],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    report: dict = {}
    try:
        url = child.stdout.readline().strip()
        if not url:
            raise RuntimeError(f"the server process ended (exit {child.wait()}) without a URL")
        yield url, report
        child.stdin.close()
        report.update(json.loads(child.stdout.readline()))
        child.wait(timeout=60)
    finally:
        child.kill()
        child.wait()


def main(path: str, kind: str, model_name: str) -> None:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    from tests.predict_grpc_server import GrpcPredictServer
    from tests.predict_server import PredictServer

    server_class = {"rest": PredictServer, "grpc": GrpcPredictServer}[kind]
    with server_class(tf.saved_model.load(path), model_name=model_name) as server:
        print(server.url, flush=True)
        sys.stdin.read()  # until the test closes it
    print(json.dumps({"requests": server.requests, "most_running": server.most_running}))


if __name__ == "__main__":
    main(*sys.argv[1:])
