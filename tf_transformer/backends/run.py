"""A run directory as a translator: its tokenizers and a checkpoint behind the `Translator`."""

from __future__ import annotations

from pathlib import Path

from tf_transformer.backends.base import Attention, BaseTranslator, decoding_mode, distinct
from tf_transformer.config import DecodeConfig


class RunTranslator(BaseTranslator):
    """A run directory's checkpoint behind the `Translator`: every decoding setting applies.

    Args:
      path: the run directory.
      config: the decoding; fields left at None take `DecodeConfig`'s defaults.
      checkpoint: best|averaged|latest|PREFIX (`RunDir.checkpoint`); None for the default.
      jit_compile: XLA decoding, compiled per input shape.
    """

    def __init__(self, path: Path, config: DecodeConfig, checkpoint: str | None, jit_compile):
        from tf_transformer.inference.translator import Translator
        from tf_transformer.run_dir import RunDir

        run = RunDir(path)
        run.read_config()  # a clear error before TensorFlow loads anything
        data = run.data_config()
        if data is not None:
            self.source_lang, self.target_lang = data.source_lang, data.target_lang
        tokenizers = run.load_tokenizers()
        self.checkpoint = run.checkpoint(checkpoint)
        self.checkpoint_name, self.checkpoint_path = self.checkpoint
        self.translator = Translator(
            tokenizers, run.load_model(self.checkpoint_path), config, jit_compile=jit_compile
        )
        self.description = (
            f"run {path} ({self.checkpoint_name} checkpoint {self.checkpoint_path}, "
            f"{decoding_mode(self.translator.config)})"
        )

    def translate(self, sentences: list[str]) -> list[str]:
        return self.translator.translate_batch(list(sentences))

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        beam_size = max(n, self.translator.config.beam_size)
        return [distinct(t)[:n] for t in self.translator.all_beams(list(sentences), beam_size)]

    def attention(self, sentence: str) -> Attention:
        result = self.translator.translate([sentence], return_attention=True)
        return result["attention"], result["src_tokens"], result["tgt_tokens"]
