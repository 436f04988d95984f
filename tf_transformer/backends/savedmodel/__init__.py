"""The `savedmodel` backend: TF Serving's SavedModel, run in this process or by a TF Serving
server (REST or gRPC).

- `export`: the SavedModel (`ExportModule`, three signatures), its `warmup` requests, the ops
  it needs (`graph_ops`), the shapes and outputs of its `signatures`;
- `translator`: the SavedModel loaded in process; `server`: a server's model, through the REST
  (`rest_client`) or gRPC (`grpc_client`) client, which share `client`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tf_transformer.backends.savedmodel.server import DEFAULT_MODEL_NAME, SCHEMES
from tf_transformer.backends.versions import find_version
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError


class SavedModelBackend:
    """`savedmodel`: a numbered version of TF Serving's model base path (see the module)."""

    name = "savedmodel"
    help = (
        f"savedmodel (default): a TF Serving SavedModel, the next version under --out (default: "
        f"saved_models/{DEFAULT_MODEL_NAME}); translate runs it in process, or through "
        "TF Serving with an http:// or grpc:// address"
    )
    export_options = frozenset({"version", "config", "jit_compile", "warmup_batch_sizes"})
    open_options = frozenset({"jit_compile", "model_name", "batch_size"})

    def detect(self, source: str) -> str | Path | None:
        if source.startswith(SCHEMES):
            return source
        return find_version(source, "saved_model.pb")

    def default_out(self, run_dir: Path) -> Path:
        return Path("saved_models") / DEFAULT_MODEL_NAME

    def export(self, run_dir: Path, out: Path, *, checkpoint: str, **options) -> Path:
        if options.get("warmup_batch_sizes") and not options.get("jit_compile"):
            # A graph export warms up with one request per signature: every shape runs alike.
            raise InvalidValueError("--warmup-batch-sizes needs --jit-compile.")
        from tf_transformer.backends.savedmodel.export import export_run_dir

        return export_run_dir(run_dir, out, checkpoint=checkpoint, **options)

    def report(self, path: Path, out: Path, options: Mapping[str, Any]) -> str:
        from tf_transformer.backends.savedmodel.warmup import warmup_path

        jit_compile = bool(options.get("jit_compile"))
        return "\n".join(
            [
                "Signatures: serving_default (beam search), greedy, attention"
                + ("; decoding compiled with XLA." if jit_compile else "."),
                f"Warm-up requests (replayed by TF Serving at load): {warmup_path(path)}",
                serving_commands(out, jit_compile=jit_compile),
            ]
        )

    def open(self, found: str | Path, config: DecodeConfig, **options):
        if isinstance(found, str):  # a server's address
            from tf_transformer.backends.savedmodel.server import ServerTranslator

            return ServerTranslator(found, config, **options)
        from tf_transformer.backends.savedmodel.translator import SavedModelTranslator

        return SavedModelTranslator(found, config, **options)


def serving_commands(base: Path, *, jit_compile: bool = False) -> str:
    """How to serve the model base path `base` and translate through the server."""
    name = base.name
    model_flag = "" if name == DEFAULT_MODEL_NAME else f" --model-name {shlex.quote(name)}"
    # TF Serving turns XLA's CPU JIT off unless asked: every compilation, and so the load's
    # warm-up, would fail with "XLA compilation disabled".
    xla_flag = " --xla_cpu_compilation_enabled=true" if jit_compile else ""
    return (
        f"Serve it (TF Serving serves the highest version under {base}):\n"
        f"  tensorflow_model_server --rest_api_port=8501 --model_name={shlex.quote(name)} "
        f"--model_base_path={shlex.quote(str(base.resolve()))}{xla_flag}\n"
        "Then translate through the server:\n"
        f'  tf-transformer translate --server http://localhost:8501{model_flag} "o gato bebe ."\n'
        "Or without a server:\n"
        f'  tf-transformer translate {shlex.quote(str(base))} "o gato bebe ."'
    )


BACKEND = SavedModelBackend()
