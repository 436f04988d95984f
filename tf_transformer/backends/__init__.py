"""Backends: one folder per export format, and one front door, `open_translator(source)`.

`REGISTRY` lists the backends (`base.Backend`): `savedmodel` (TF Serving's SavedModel, run in
process or through a TF Serving server over REST or gRPC), `ctranslate2` and `litert`. Each
folder owns its export, its runtime and its metadata; `open_translator` asks each backend in
turn whether a source is its own (`Backend.detect`), and a directory none claims is a run
directory (`run.RunTranslator`). `tf-transformer export --format` offers the registry's names.

Adding a backend is one folder (see `docs/development.md`) and one name in `REGISTRY`.

Every translator has `.translate(sentences)`, `.translate_document(text)`, `.attention(sentence)`
and `.description`; decoding settings are `DecodeConfig` fields, merged with an export's by
one policy (`base.merge_decoding`): what a backend cannot honour is refused with one line that
says what to do, never ignored.
"""

from __future__ import annotations

from pathlib import Path

from tf_transformer.backends import ctranslate2, litert, savedmodel
from tf_transformer.backends.base import Backend, BaseTranslator, refuse_options
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError, MissingFileError

REGISTRY: tuple[Backend, ...] = (savedmodel.BACKEND, ctranslate2.BACKEND, litert.BACKEND)

RUN_OPTIONS = frozenset({"checkpoint", "jit_compile"})  # what a run directory honours


def backend(name: str) -> Backend:
    """The registered backend `name` (an `export --format` value)."""
    for candidate in REGISTRY:
        if candidate.name == name:
            return candidate
    names = ", ".join(b.name for b in REGISTRY)
    raise InvalidValueError(f"no backend {name!r}: the backends are {names}.")


def detect(source: str | Path) -> tuple[Backend, str | Path] | None:
    """`(backend, what it opens)` for the first backend that claims `source`; None for none
    (a run directory, or nothing)."""
    for candidate in REGISTRY:
        found = candidate.detect(str(source))
        if found is not None:
            return candidate, found
    return None


def open_translator(
    source: str | Path,
    config: DecodeConfig | None = None,
    *,
    checkpoint: str | None = None,
    jit_compile: bool = False,
    model_name: str | None = None,
    batch_size: int | None = None,
) -> BaseTranslator:
    """Opens a translator on a run directory, an export, or a TF Serving address.

    Args:
      source: a run directory; an export (`savedmodel`, `ctranslate2` or `litert`: a version
        folder, or a base path, whose highest version is opened); or a TF Serving address:
        `http(s)://host:8501` (REST) or `grpc://host:8500`.
      config: the decoding (`DecodeConfig`); fields left at None take the backend's own:
        `DecodeConfig`'s defaults for a run directory, the export's otherwise. What an export
        cannot honour is refused (`base.merge_decoding`): a SavedModel or server takes its
        export's beam size or 1 (its `greedy` signature) and nothing else that differs; a
        LiteRT export takes every setting, its caps at most the export's; a CTranslate2 model
        takes every setting.
      checkpoint: run directories only: best|averaged|latest|PREFIX (`RunDir.checkpoint`).
      jit_compile: XLA decoding: a run directory compiles per input shape; a SavedModel must
        have been exported with `--jit-compile`.
      model_name: the served model's name (servers only; default "transformer").
      batch_size: sentences per request (servers only; default 32).

    Returns:
      A `base.BaseTranslator`: `.translate(list[str]) -> list[str]`, `.translate_document(str)
      -> str` (paragraphs and files), `.attention(str)` and `.description`.

    Raises:
      ValueError: a setting or option the backend cannot honour, or a bad value.
      FileNotFoundError: `source` is neither a run directory nor an export.
    """
    config = config or DecodeConfig()
    options = {
        "checkpoint": checkpoint,
        "jit_compile": jit_compile or None,
        "model_name": model_name,
        "batch_size": batch_size,
    }
    options = {name: value for name, value in options.items() if value is not None}
    found = detect(source)
    if found is not None:
        chosen, what = found
        refuse_options(f"{what} ({chosen.name})", chosen.open_options, options)
        return chosen.open(what, config, **options)
    path = Path(source)
    if not path.is_dir():
        raise MissingFileError(
            f"{path} is neither a run directory nor an export ("
            + ", ".join(b.name for b in REGISTRY)
            + ")."
        )
    from tf_transformer.backends.run import RunTranslator

    refuse_options(f"the run directory {path}", RUN_OPTIONS, options)
    return RunTranslator(path, config, checkpoint, jit_compile)
