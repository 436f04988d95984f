"""The `ctranslate2` backend: the weights as a CTranslate2 model folder (OpenNMT's C++
inference engine, `pip install '.[ctranslate2]'`), run by CTranslate2 without TensorFlow.

- `export`: the conversion through CTranslate2's converter API, with our plain tokenizers;
- `translator`: `CTranslate2Translator`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tf_transformer.backends.ctranslate2.translator import METADATA_FILE, MissingDependency
from tf_transformer.backends.versions import find_version
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import PathExistsError


class CTranslate2Backend:
    """`ctranslate2`: one model folder, never overwritten (see the module)."""

    name = "ctranslate2"
    help = (
        "ctranslate2: a CTranslate2 model folder with the vocabularies, written to --out "
        "(default: saved_models/<RUN_DIR name>-ct2); needs `pip install '.[ctranslate2]'`; "
        "--quantization int8, float16, ... (CTranslate2's weight types)"
    )
    export_options = frozenset({"quantization", "config"})
    open_options = frozenset()

    def detect(self, source: str) -> Path | None:
        return None if "://" in source else find_version(source, METADATA_FILE)

    def default_out(self, run_dir: Path) -> Path:
        return Path("saved_models") / f"{run_dir.resolve().name}-ct2"

    def export(self, run_dir: Path, out: Path, *, checkpoint: str, **options) -> Path:
        import importlib.util

        if out.exists():
            raise PathExistsError(f"{out} exists; a CTranslate2 export is never overwritten.")
        if importlib.util.find_spec("ctranslate2") is None:
            raise MissingDependency(
                "--format ctranslate2 needs CTranslate2: pip install '.[ctranslate2]'."
            )
        from tf_transformer.backends.ctranslate2.export import export_ctranslate2

        return export_ctranslate2(run_dir, out, checkpoint=checkpoint, **options)

    def report(self, path: Path, out: Path, options: Mapping[str, Any]) -> str:
        return f'Translate with it: tf-transformer translate {path} "o gato bebe ."'

    def open(self, found: str | Path, config: DecodeConfig, **options):
        from tf_transformer.backends.ctranslate2.translator import CTranslate2Translator

        return CTranslate2Translator(found, config, **options)


BACKEND = CTranslate2Backend()
