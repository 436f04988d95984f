"""What every backend shares: the `Backend` protocol, the base translator, and the one policy
for merging a request's decoding settings with an export's.

A backend is a folder under `tf_transformer/backends/` (its export, its runtime, its
metadata) whose `__init__.py` defines one `Backend`; the registry (`backends/__init__.py`)
lists it once. `open_translator` and `tf-transformer export --format` read the registry.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.text.document import translate_document

# (cross-attention weights (heads, tgt_len, src_len), source wordpieces, target wordpieces)
Attention = tuple[Any, list[str], list[str]]

# The export options a backend may take (`Backend.export_options`); each is the `export`
# command's flag of the same name, and `export(..., **options)`'s keyword.
EXPORT_OPTIONS = ("version", "quantization", "config", "jit_compile", "warmup_batch_sizes")


class Backend(Protocol):
    """One export format and the translator that runs it.

    Attributes:
      name: the `--format` value, e.g. "litert".
      help: one sentence for `export --help`: what is written and what runs it.
      export_options: the `EXPORT_OPTIONS` its `export` takes (the command refuses the others).
      open_options: the `open_translator` keywords it honours besides `config`
        ("jit_compile", "model_name", "batch_size"); the others are refused.
    """

    name: str
    help: str
    export_options: frozenset[str]
    open_options: frozenset[str]

    def detect(self, source: str) -> str | Path | None:
        """What `open` takes for `source` (a path, a version folder under a base path, a URL),
        or None when `source` is not this backend's."""

    def default_out(self, run_dir: Path) -> Path:
        """Where `export` writes when no --out is given."""

    def export(self, run_dir: Path, out: Path, *, checkpoint: str, **options) -> Path:
        """Writes the export of a run directory's checkpoint; returns the folder written."""

    def report(self, path: Path, out: Path, options: Mapping[str, Any]) -> str:
        """What the export command prints after `export`: how to run what was written."""

    def open(self, found: str | Path, config: DecodeConfig, **options) -> BaseTranslator:
        """A translator on what `detect` found."""


class BaseTranslator:
    """What every translator `open_translator` returns shares: `translate_document` on top of
    `translate`, the one-line `description`, and `checkpoint` (a run directory's
    `(name, prefix)`; None for an export, which holds one set of weights).

    A subclass sets `description`, `source_lang` (the language the sentence splitter reads) and
    `target_lang` where the export records them, and defines `translate`; `attention` and
    `translate_n_best` are refused unless it defines its own.
    """

    description = ""
    source_lang = "pt"
    target_lang = "en"
    checkpoint: tuple[str, str] | None = None

    def translate(self, sentences: list[str]) -> list[str]:
        """One translation per sentence, in order."""
        raise NotImplementedError

    def attention(self, sentence: str) -> Attention:
        """The last decoder layer's cross-attention heads for one sentence."""
        raise InvalidValueError(
            f"attention plots need the TensorFlow model; {self.description} has none: open "
            "the run directory or its exported SavedModel."
        )

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        """Each sentence's `n` best distinct translations, best first (fewer when beams read
        alike): beam search with at least `n` beams."""
        raise InvalidValueError(
            f"{self.description} gives one translation a sentence: alternatives need a run "
            "directory or an export (SavedModel, LiteRT, CTranslate2)."
        )

    def translate_document(self, text: str, *, batch_size: int = 32) -> str:
        """Splits `text` into sentences (line by line), translates them `batch_size` at a time
        and puts the translations back: line breaks, blank lines and spacing are kept."""
        return translate_document(
            text, self.translate, language=self.source_lang, batch_size=batch_size
        )


def distinct(texts: list[str]) -> list[str]:
    """`texts` without repeats, in order (beams that read alike are one alternative)."""
    return list(dict.fromkeys(texts))


def decoding_mode(config: DecodeConfig) -> str:
    """ "greedy" or "beam 4, length penalty 1.0", for a description."""
    if config.beam_size is None or config.beam_size == 1:
        return "greedy"
    return f"beam {config.beam_size}, length penalty {config.length_penalty}"


def merge_decoding(
    where: str,
    exported: DecodeConfig | None,
    request: DecodeConfig,
    *,
    fixed: Collection[str] = (),
    capped: Collection[str] = (),
    choices: Mapping[str, Collection[Any]] | None = None,
) -> DecodeConfig:
    """The decoding a backend runs: the export's settings, with what the request sets.

    The one policy for every backend. A setting the request leaves at None is the export's.
    A setting it gives must be one the backend can honour, else one error line says what
    would: a new export or the run directory.

    Args:
      where: the export, for the errors ("the SavedModel saved_models/x/1").
      exported: the settings recorded at export; None when unknown (a server).
      request: the request's settings (`DecodeConfig.given`: the fields set).
      fixed: settings baked into the export: a request may only repeat them.
      capped: settings a request may lower but not raise (sizes fixed at export).
      choices: settings with a few allowed values (a SavedModel's beam size: its export's
        or 1, its greedy signature).
    """
    exported_settings = {} if exported is None else exported.given()
    changes = request.given()
    for name, value in changes.items():
        flag = "--" + name.replace("_", "-")
        old = exported_settings.get(name)
        allowed = (choices or {}).get(name)
        if allowed is not None and value not in allowed:
            listed = " or ".join(str(v) for v in sorted(allowed))
            raise InvalidValueError(
                f"{where} decodes with {name} {listed}; {flag} {value} needs a new export "
                f"(`tf-transformer export RUN_DIR {flag} {value}`) or the run directory."
            )
        if name in fixed and allowed is None and value != old:
            raise InvalidValueError(
                f"{where} decodes as it was exported ({name}="
                f"{'as exported' if old is None else old}); {flag} {value} needs a new export "
                "or the run directory."
            )
        if name in capped and old is not None and value > old:
            raise InvalidValueError(
                f"{name} {value} is more than {where}'s {old}: export again with {flag}."
            )
    return (exported or DecodeConfig()).replace(**changes)


def refuse_options(where: str, honoured: Collection[str], given: Mapping[str, Any]) -> None:
    """One error line naming the `open_translator` options (`given`: those set, by keyword)
    that `where` does not honour."""
    refused = [name for name in given if name not in honoured]
    if refused:
        flags = ", ".join("--" + name.replace("_", "-") for name in refused)
        raise InvalidValueError(
            f"{where} cannot take {flags}: "
            + "; ".join(OPTION_NEEDS[name] for name in refused)
            + "."
        )


OPTION_NEEDS = {
    "checkpoint": "--checkpoint picks a run directory's checkpoint (an export has one)",
    "jit_compile": "XLA is chosen at export time (`tf-transformer export RUN_DIR "
    "--jit-compile`) or per call on a run directory",
    "model_name": "--model-name names a model on a TF Serving server",
    "batch_size": "--batch-size is a server's sentences per request",
}


def export_arguments(args: argparse.Namespace, backend: Backend) -> dict[str, Any]:
    """The `EXPORT_OPTIONS` the export command was given (set, not None/False) for `backend`.

    Raises:
      InvalidValueError: one line naming the options `backend` does not take.
    """
    given = {name: getattr(args, name, None) for name in EXPORT_OPTIONS}
    given = {name: value for name, value in given.items() if value not in (None, False)}
    if "config" in given and not given["config"].given():
        del given["config"]
    refused = sorted(set(given) - backend.export_options)
    if refused:
        flags = ", ".join(
            "decoding flags" if n == "config" else "--" + n.replace("_", "-") for n in refused
        )
        raise InvalidValueError(f"{flags}: not for --format {backend.name}.")
    return given


def load_run(run_dir: str | Path, checkpoint: str | None):
    """`(tokenizers, model)` of a run directory's checkpoint (`RunDir.checkpoint`), for an
    export; a directory that is not a run is one error line before TensorFlow loads."""
    from tf_transformer.run_dir import RunDir

    run = RunDir(run_dir)
    run.read_config()
    return run.load_tokenizers(), run.load_model(checkpoint)
