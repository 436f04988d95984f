"""The `litert` backend: the encoder and the one-token decoder step as LiteRT files, run with
ai-edge-litert and numpy, without TensorFlow.

- `export`: the two files, the plain tokenizers and `litert.json` (TensorFlow);
- `runtime`: `LiteRTTranslator`, which keeps the caches in the interpreter's inputs;
- `search`: greedy and beam search in numpy.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tf_transformer.backends.litert.runtime import METADATA_FILE
from tf_transformer.backends.versions import find_version
from tf_transformer.config import DecodeConfig


class LiteRTBackend:
    """`litert`: a numbered version folder under a base path (see the module)."""

    name = "litert"
    help = (
        "litert: the encoder and decoder step as LiteRT files with the vocabularies, the next "
        "version under --out (default: saved_models/<RUN_DIR name>-litert); runs with "
        "`pip install '.[litert]'`, no TensorFlow; --quantization none or int8"
    )
    export_options = frozenset({"version", "quantization", "config"})
    open_options = frozenset()

    def detect(self, source: str) -> Path | None:
        return None if "://" in source else find_version(source, METADATA_FILE)

    def default_out(self, run_dir: Path) -> Path:
        return Path("saved_models") / f"{run_dir.resolve().name}-litert"

    def export(self, run_dir: Path, out: Path, *, checkpoint: str, **options) -> Path:
        from tf_transformer.backends.litert.export import export_litert_run_dir

        return export_litert_run_dir(run_dir, out, checkpoint=checkpoint, **options)

    def report(self, path: Path, out: Path, options: Mapping[str, Any]) -> str:
        return (
            "Translate with it (ai-edge-litert, no TensorFlow): "
            f'tf-transformer translate {shlex.quote(str(out))} "o gato bebe ."'
        )

    def open(self, found: str | Path, config: DecodeConfig, **options):
        from tf_transformer.backends.litert.runtime import LiteRTTranslator

        return LiteRTTranslator(found, config, **options)


BACKEND = LiteRTBackend()
