"""Translating with a CTranslate2 export (`backends.ctranslate2.export`): CTranslate2 decodes,
our plain tokenizers (`text.plain`) turn text into its tokens and back; no TensorFlow.

Every decoding setting applies. Greedy search gives our ids (the export carries our position
table). Beam search is CTranslate2's: its length penalty divides a hypothesis' log-probability
by `length ** length_penalty`, where ours divides by GNMT's `((5 + length) / 6) **
length_penalty`, so beams may rank differently near a tie.
"""

from __future__ import annotations

from pathlib import Path

from tf_transformer.backends.base import BaseTranslator, decoding_mode, distinct
from tf_transformer.backends.export_files import open_export, read_tokenizers
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import TransformerError
from tf_transformer.text.special_tokens import PAD_ID, RESERVED_TOKENS

METADATA_FILE = "ctranslate2.json"  # marks our CTranslate2 export; lists its files
EXPORT_AGAIN = "tf-transformer export RUN --format ctranslate2"


class MissingDependency(TransformerError, ImportError):
    """ctranslate2 is not installed (the CLI prints it as one line)."""


class CTranslate2Translator(BaseTranslator):
    """A CTranslate2 export folder; `open_translator` returns it for such a folder.

    Args:
        folder: the export folder (`ctranslate2.json` and CTranslate2's `model.bin`).
        config: the decoding (`DecodeConfig`); fields left at None take the export's, the
            caps at most the export's (the model's position table is that long).
        compute_type: CTranslate2's compute type ("default": the weights' type).
    """

    def __init__(
        self, folder: str | Path, config: DecodeConfig | None = None, compute_type="default"
    ):
        self.folder = Path(folder)
        meta, self.config = open_export(
            self.folder,
            METADATA_FILE,
            EXPORT_AGAIN,
            config,
            f"the CTranslate2 export {self.folder}",
        )
        languages = meta.get("languages", {})
        self.source_lang = languages.get("source", "pt")  # for the splitter
        self.target_lang = languages.get("target", "en")
        self.tokenizers = read_tokenizers(self.folder, meta)
        try:
            import ctranslate2
        except ImportError:
            raise MissingDependency(
                "a CTranslate2 export runs with CTranslate2: pip install "
                "'tf_transformer[ctranslate2]' (or pip install ctranslate2)."
            ) from None
        self.translator = ctranslate2.Translator(
            str(self.folder), device="cpu", compute_type=compute_type
        )
        self.description = (
            f"CTranslate2 {self.folder} ({meta['quantization']}, {decoding_mode(self.config)})"
        )

    def translate(self, sentences: list[str]) -> list[str]:
        """One translation per sentence (an empty one for a sentence with no tokens)."""
        return [texts[0] for texts in self._translate(sentences, 1)]

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        return [distinct(texts)[:n] for texts in self._translate(sentences, n)]

    def _translate(self, sentences: list[str], n: int) -> list[list[str]]:
        """Each sentence's `n` best hypotheses, best first ("" for a sentence with no
        tokens), from beam search with `max(n, beam_size)` beams."""
        source, target = self.tokenizers["source"], self.tokenizers["target"]
        cap = self.config.max_source_tokens - 2  # CTranslate2 adds START and END
        pieces = [
            [source.vocab[i] for i in source.tokenize(sentence)[1:-1][:cap]]
            for sentence in sentences
        ]
        full = [i for i, row in enumerate(pieces) if row]
        texts = [[""] for _ in sentences]
        if not full:
            return texts
        results = self.translator.translate_batch(
            [pieces[i] for i in full],
            beam_size=max(n, self.config.beam_size),
            num_hypotheses=n,
            length_penalty=self.config.length_penalty,
            max_decoding_length=self.config.max_new_tokens,
            suppress_sequences=[[RESERVED_TOKENS[PAD_ID]]],  # as our searches: never PAD
        )
        for i, result in zip(full, results):
            texts[i] = [
                target.detokenize(target.ids[t] for t in hypothesis)
                for hypothesis in result.hypotheses
            ]
        return texts
