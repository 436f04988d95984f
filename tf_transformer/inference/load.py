"""One front door for translating: `open_translator(source)`.

The source is a run directory, an exported SavedModel or LiteRT export (a version directory or
a model base path) or a TF Serving server (REST `http://host:8501` or gRPC `grpc://host:8500`); each opens
with the same `.translate(sentences)` and `.attention(sentence)`. Decoding settings are `DecodeConfig` fields;
a backend that cannot honour one (a SavedModel decodes as it was exported) raises a
`ValueError` that says what to do, instead of ignoring it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError, MissingFileError
from tf_transformer.text.document import TranslatesDocuments

# (cross-attention weights (heads, tgt_len, src_len), source wordpieces, target wordpieces)
Attention = tuple[Any, list[str], list[str]]


class TextTranslator(Protocol):
    """What `open_translator` returns, whatever the source."""

    description: str  # one line saying what runs (the source, checkpoint, decoding)
    # `(name, prefix)` of the run checkpoint read (`RunDir.checkpoint`); None for a SavedModel
    # or a server, which hold one set of weights.
    checkpoint: tuple[str, str] | None

    def translate(self, sentences: list[str]) -> list[str]:
        """One translation per sentence, in order."""

    def attention(self, sentence: str) -> Attention:
        """The last decoder layer's cross-attention heads for one sentence."""

    def translate_document(self, text: str, *, batch_size: int = 32) -> str:
        """A paragraph or file: its sentences translated, lines and spacing kept."""


def saved_model_version(path: str | Path) -> Path | None:
    """The SavedModel directory at `path`: itself, or its highest numbered version (TF Serving's
    base-path layout); None when `path` holds no SavedModel."""
    path = Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    versions = [p.parent for p in path.glob("*/saved_model.pb") if p.parent.name.isdigit()]
    return max(versions, key=lambda p: int(p.name)) if versions else None


def _texts(tensor) -> list[str]:
    return [text.decode("utf-8") for text in tensor.numpy()]


class RunTranslator(TranslatesDocuments):
    """A run directory's checkpoint behind the `Translator`: every decoding setting applies."""

    def __init__(self, path: Path, config: DecodeConfig, checkpoint: str | None, jit_compile):
        from tf_transformer.inference.translator import Translator
        from tf_transformer.run_dir import RunDir

        run = RunDir(path)
        run.read_config()  # a clear error before TensorFlow loads anything
        data = run.data_config()
        self.source_lang = data.source_lang if data is not None else "pt"
        tokenizers = run.load_tokenizers()
        self.checkpoint = run.checkpoint(checkpoint)
        self.checkpoint_name, self.checkpoint_path = self.checkpoint
        self.translator = Translator(
            tokenizers, run.load_model(self.checkpoint_path), config, jit_compile=jit_compile
        )
        config = self.translator.config
        mode = "greedy"
        if config.beam_size > 1:
            mode = f"beam {config.beam_size}, length penalty {config.length_penalty}"
        self.description = (
            f"run {path} ({self.checkpoint_name} checkpoint {self.checkpoint_path}, {mode})"
        )

    def translate(self, sentences: list[str]) -> list[str]:
        return self.translator.translate_batch(list(sentences))

    def attention(self, sentence: str) -> Attention:
        result = self.translator.translate([sentence], return_attention=True)
        return result["attention"], result["src_tokens"], result["tgt_tokens"]


class _Exported(TranslatesDocuments):
    """What SavedModel and server backends share: the decoding was fixed at export."""

    checkpoint = None  # one set of weights

    def __init__(self, where: str, exported: dict | None, config: DecodeConfig, jit_compile):
        changes = config.given()  # what the request sets; the rest is the export's
        beam_size = changes.pop("beam_size", None)
        known = exported or {}
        if jit_compile and not known.get("jit_compile"):
            raise InvalidValueError(
                f"{where} decodes as it was exported; XLA is chosen at export time: "
                "`tf-transformer export RUN_DIR --jit-compile`."
            )
        exported_beam = known.get("beam_size")
        if beam_size not in (None, 1, exported_beam):
            beams = f"beam {exported_beam} or" if exported_beam else "its export's beam size or"
            raise InvalidValueError(
                f"{where} decodes with {beams} greedily (--beam-size 1); beam size {beam_size} "
                f"needs a new export (`tf-transformer export RUN_DIR --beam-size {beam_size}`) "
                "or the run directory."
            )
        for name, value in changes.items():
            if value != known.get(name):
                flag = "--" + name.replace("_", "-")
                raise InvalidValueError(
                    f"{where} decodes as it was exported ({name}="
                    f"{known.get(name, 'as exported')}); {flag} {value} needs a new export "
                    "or the run directory."
                )
        self.signature = "greedy" if beam_size == 1 else "serving_default"


class SavedModelTranslator(_Exported):
    """An exported SavedModel, run in process (it needs only TensorFlow and TF Text)."""

    def __init__(self, version_dir: Path, config: DecodeConfig, jit_compile: bool):
        from tf_transformer.inference.serving.export import DECODING_FILE

        recorded = version_dir / DECODING_FILE
        exported = json.loads(recorded.read_text()) if recorded.is_file() else None
        super().__init__(f"the SavedModel {version_dir}", exported, config, jit_compile)
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        self.loaded = tf.saved_model.load(str(version_dir))
        self.description = f"SavedModel {version_dir} (signature {self.signature})"

    def translate(self, sentences: list[str]) -> list[str]:
        import tensorflow as tf

        if not sentences:
            return []
        signature = self.loaded.signatures[self.signature]
        return _texts(signature(sentences=tf.constant(list(sentences), tf.string))["translations"])

    def attention(self, sentence: str) -> Attention:
        import tensorflow as tf

        out = self.loaded.signatures["attention"](sentence=tf.constant(sentence))
        weights = out["attention_weights"]
        return weights, _texts(out["source_tokens"]), _texts(out["target_tokens"])


class ServerTranslator(_Exported):
    """A model served by TF Serving over REST or gRPC (`tf_transformer.inference.serving`)."""

    def __init__(self, url: str, model_name: str, config: DecodeConfig, batch_size: int):
        super().__init__(f"the served model {model_name!r}", None, config, jit_compile=False)
        from tf_transformer.inference.serving import serving_client

        self.client = serving_client(
            url, model_name, signature=self.signature, batch_size=batch_size
        )
        self.description = f"TF Serving {url}, model {model_name} (signature {self.signature})"

    def translate(self, sentences: list[str]) -> list[str]:
        return self.client.translate(list(sentences))

    def attention(self, sentence: str) -> Attention:
        raise InvalidValueError(
            "attention plots need the model itself: open the run directory or the exported "
            "SavedModel instead of the server."
        )


def open_translator(
    source: str | Path,
    config: DecodeConfig | None = None,
    *,
    checkpoint: str | None = None,
    jit_compile: bool = False,
    model_name: str = "transformer",
    batch_size: int = 32,
) -> TextTranslator:
    """Opens a translator on a run directory, a SavedModel, a LiteRT export or a TF Serving URL.

    Args:
      source: a run directory, a SavedModel or a LiteRT export (version directory or base path:
        its highest version), or a TF Serving address: `http(s)://` (REST) or `grpc://host:port`.
      config: the decoding (`DecodeConfig`); fields left at None take the backend's own:
        `DecodeConfig`'s defaults for a run directory, the export's for a SavedModel, a LiteRT
        export or a server. A SavedModel or server takes `beam_size=1` (its `greedy` signature)
        or its export's beam size, and nothing else that differs from its export; a LiteRT export
        takes every setting, its caps at most the export's.
      checkpoint: run directories only: best|averaged|latest|PREFIX (`RunDir.checkpoint`).
      jit_compile: XLA decoding: a run directory compiles per input shape; a SavedModel must
        have been exported with `--jit-compile`.
      model_name: the served model's name (servers only).
      batch_size: sentences per request (servers only).

    Returns:
      An object with `.translate(list[str]) -> list[str]`, `.translate_document(str) -> str`
      (paragraphs and files), `.attention(str)` and `.description` (one line saying what runs).

    Raises:
      ValueError: a setting the backend cannot honour, or a bad value.
      FileNotFoundError: `source` is neither a run directory nor a SavedModel.
    """
    config = config or DecodeConfig()
    text = str(source)
    if text.startswith(("http://", "https://", "grpc://")):
        if checkpoint is not None:
            raise InvalidValueError("--checkpoint is for run directories; a server has one model.")
        return ServerTranslator(text, model_name, config, batch_size)
    path = Path(source)
    from tf_transformer.inference.litert.runtime import LiteRTTranslator, litert_version

    litert_dir = litert_version(path)
    if litert_dir is not None:
        if checkpoint is not None or jit_compile:
            raise InvalidValueError(
                f"{litert_dir} is a LiteRT export with one set of weights: --checkpoint and "
                "--jit-compile are for run directories."
            )
        return LiteRTTranslator(litert_dir, config)
    version_dir = saved_model_version(path)
    if version_dir is not None:
        if checkpoint is not None:
            raise InvalidValueError(
                f"{version_dir} is an exported SavedModel with one set of weights; --checkpoint "
                "is for run directories."
            )
        return SavedModelTranslator(version_dir, config, jit_compile)
    if not path.is_dir():
        raise MissingFileError(f"{path} is neither a run directory nor an exported SavedModel.")
    return RunTranslator(path, config, checkpoint, jit_compile)
