"""`tf-transformer serve PATH`: LibreTranslate's API and a page to try the model
(`tf_transformer.serve`)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from tf_transformer.commands import (
    CHECKPOINT_HELP,
    DEFAULT_MODEL_NAME,
    add_decoding_arguments,
    decode_config,
    model_loading,
    positive_int,
)
from tf_transformer.errors import CLIError, MissingFileError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="Serve a model over LibreTranslate's HTTP API, with a page to try it.",
        description=(
            "Opens PATH (a run directory, a SavedModel, CTranslate2 or LiteRT export, or a TF "
            "Serving address) and serves it: POST /translate and GET /languages as "
            "LibreTranslate answers them, so its clients and browser extensions work, and a "
            "page at / to try it. Concurrent requests are batched into the backend. The host "
            "is the loopback address unless --host says otherwise: anyone who can reach the "
            "port can use the model (--api-keys FILE asks for a key)."
        ),
    )
    parser.add_argument("path", metavar="PATH", help="What to serve (as `translate` takes it).")
    parser.add_argument("--host", default="127.0.0.1", help="Address (default: 127.0.0.1).")
    parser.add_argument("--port", type=int, default=5000, help="Port (default: 5000).")
    parser.add_argument(
        "--char-limit",
        type=int,
        default=5000,
        help="Most characters a request may hold, -1 for no limit (default: 5000).",
    )
    parser.add_argument(
        "--batch-limit",
        type=int,
        default=-1,
        help="Most texts a list `q` may hold, -1 for no limit (default).",
    )
    parser.add_argument(
        "--api-keys",
        metavar="FILE",
        default=None,
        help="A file of API keys, one a line: then every /translate request needs one.",
    )
    parser.add_argument(
        "--max-batch",
        type=positive_int,
        default=32,
        help="Most sentences one backend call takes (default: 32).",
    )
    parser.add_argument(
        "--max-queue",
        type=positive_int,
        default=256,
        help="Most requests waiting; more get HTTP 503 (default: 256).",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="Seconds a request may wait for its translation; then HTTP 504 (default: 120).",
    )
    parser.add_argument("--checkpoint", default=None, metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--model-name",
        default=None,
        metavar="NAME",
        help=f"With a TF Serving address: the served model's name (default: {DEFAULT_MODEL_NAME}).",
    )
    add_decoding_arguments(parser, "As for translate.")
    parser.set_defaults(func=run)


def read_keys(path: str) -> frozenset[str]:
    """The API keys of `path`: one a line, blank lines ignored."""
    file = Path(path)
    if not file.is_file():
        raise MissingFileError(f"--api-keys {file}: no such file.")
    keys = frozenset(line.strip() for line in file.read_text(encoding="utf-8").splitlines())
    keys -= {""}
    if not keys:
        raise CLIError(f"--api-keys {file} holds no key.")
    return keys


def run(args: argparse.Namespace) -> int:
    missing = [
        m for m in ("starlette", "uvicorn", "multipart") if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise CLIError(f"serve needs {', '.join(missing)}: pip install '.[serve]'.")
    from tf_transformer.backends import open_translator
    from tf_transformer.serve.requests import Limits

    limits = Limits(
        char_limit=args.char_limit,
        batch_limit=args.batch_limit,
        api_keys=read_keys(args.api_keys) if args.api_keys else frozenset(),
    )
    with model_loading(args.path):
        translator = open_translator(
            args.path, decode_config(args), checkpoint=args.checkpoint, model_name=args.model_name
        )
    import uvicorn

    from tf_transformer.serve.app import make_app

    app = make_app(
        translator, limits, max_batch=args.max_batch, max_queue=args.max_queue, timeout=args.timeout
    )
    print(f"Serving {translator.description}", flush=True)
    print(
        f"  page: http://{args.host}:{args.port}/  API: POST /translate, GET /languages", flush=True
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
