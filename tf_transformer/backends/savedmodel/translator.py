"""An exported SavedModel run in process (TensorFlow and TF Text only)."""

from __future__ import annotations

import json
from pathlib import Path

from tf_transformer.backends.base import Attention, BaseTranslator, distinct, merge_decoding
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError

# The decoding settings baked into an export, beside its warm-up requests: `open_translator`
# reads them to refuse flags the export cannot honour (TF Serving ignores the file).
DECODING_FILE = "assets.extra/tf_transformer_decoding.json"


def exported_decoding(where: str, recorded: dict | None, config: DecodeConfig, jit_compile):
    """`(signature, decoding)` a request runs on a SavedModel exported with the `recorded`
    settings (None: unknown, a server): its beam size (`serving_default`) or 1 (`greedy`),
    every other setting as exported (`merge_decoding`)."""
    recorded = dict(recorded or {})
    exported_xla = recorded.pop("jit_compile", False)
    if jit_compile and not exported_xla:
        raise InvalidValueError(
            f"{where} decodes as it was exported; XLA is chosen at export time: "
            "`tf-transformer export RUN_DIR --jit-compile`."
        )
    exported = DecodeConfig.from_dict(recorded) if recorded else None
    beams = {1} if exported is None or exported.beam_size is None else {1, exported.beam_size}
    merged = merge_decoding(
        where,
        exported,
        config,
        fixed=tuple(DecodeConfig().to_dict()),
        choices={"beam_size": beams},
    )
    return ("greedy" if config.beam_size == 1 else "serving_default"), merged


def texts(tensor) -> list[str]:
    """A string tensor's items as Python strings."""
    return [text.decode("utf-8") for text in tensor.numpy()]


class SavedModelTranslator(BaseTranslator):
    """An exported SavedModel version folder, loaded in this process."""

    def __init__(self, version_dir: Path, config: DecodeConfig, jit_compile: bool = False):
        recorded = version_dir / DECODING_FILE
        exported = json.loads(recorded.read_text()) if recorded.is_file() else None
        self.signature, self.config = exported_decoding(
            f"the SavedModel {version_dir}", exported, config, jit_compile
        )
        self.beams = (exported or {}).get("beam_size") or 1  # of the `alternatives` signature
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        self.loaded = tf.saved_model.load(str(version_dir))
        self.description = f"SavedModel {version_dir} (signature {self.signature})"

    def translate(self, sentences: list[str]) -> list[str]:
        import tensorflow as tf

        if not sentences:
            return []
        signature = self.loaded.signatures[self.signature]
        return texts(signature(sentences=tf.constant(list(sentences), tf.string))["translations"])

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        """The `alternatives` signature's beams, without repeats: at most the export's beam
        size."""
        import tensorflow as tf

        signature = self.loaded.signatures.get("alternatives")
        if signature is None or n > self.beams:
            have = "no alternatives signature" if signature is None else f"{self.beams} beams"
            raise InvalidValueError(
                f"{self.description} has {have}: {n} translations a sentence need an export "
                f"with --beam-size {n} or more (tf-transformer export RUN_DIR --beam-size {n})."
            )
        if not sentences:
            return []
        out = signature(sentences=tf.constant(list(sentences), tf.string))["alternatives"]
        return [distinct([t.decode("utf-8") for t in row])[:n] for row in out.numpy()]

    def attention(self, sentence: str) -> Attention:
        import tensorflow as tf

        out = self.loaded.signatures["attention"](sentence=tf.constant(sentence))
        weights = out["attention_weights"]
        return weights, texts(out["source_tokens"]), texts(out["target_tokens"])
