"""Translating with a LiteRT export (`backends.litert.export`): ai-edge-litert, numpy and the
tokenizer's `regex` (`text.plain`), no TensorFlow.

One interpreter per file. The decoder step's inputs stay in the interpreter between calls: the
cross-attention keys/values are written once per batch, the self-attention caches one position
per step (the step returns only that position), so a step moves the ids, the step and the new
keys/values in, the logits out. Beam search reorders the caches' filled positions in place.

The searches are `backends.litert.search` (numpy).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tf_transformer.backends.base import BaseTranslator, decoding_mode, distinct
from tf_transformer.backends.export_files import open_export, read_tokenizers
from tf_transformer.backends.litert.search import beam_search, greedy
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import TransformerError
from tf_transformer.native_logs import litert_lines_held
from tf_transformer.text.special_tokens import END_ID, START_ID

METADATA_FILE = "litert.json"  # what the export writes, and a runtime reads first
EXPORT_AGAIN = "tf-transformer export RUN --format litert"


class MissingDependency(TransformerError, ImportError):
    """ai-edge-litert is not installed (the CLI prints it as one line)."""


def has_raw_invoke(interpreter) -> bool:
    """Whether `interpreter` has ai-edge-litert's private `_interpreter.Invoke` (2.3 has)."""
    return callable(getattr(getattr(interpreter, "_interpreter", None), "Invoke", None))


class _Interpreter:
    """An interpreter with its tensors by name, and numpy views into its inputs held between
    calls (a view costs about as much as a small op: a step made a dozen).

    `Interpreter.invoke` refuses to run while any view is alive (it counts the references to
    the wrapped interpreter), so `invoke` calls the wrapped interpreter's `Invoke` where
    `has_raw_invoke`; elsewhere it drops the views, calls `Interpreter.invoke` and makes them
    again (11 us a step more: 8% of a greedy step of the tutorial preset, AMD EPYC, 1 thread).
    A caller holds no view across `invoke`.
    """

    def __init__(self, path: Path, num_threads: int | None):
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:
            raise MissingDependency(
                "a LiteRT export runs with ai-edge-litert: pip install 'tf_transformer[litert]' "
                "(or pip install ai-edge-litert)."
            ) from None

        self.interpreter = Interpreter(model_path=str(path), num_threads=num_threads)
        details = self.interpreter.get_input_details()
        self.inputs = {d["name"]: d["index"] for d in details}
        self.signatures = {d["name"]: tuple(d["shape_signature"]) for d in details}
        self.outputs = [d["index"] for d in self.interpreter.get_output_details()]
        self.shapes: dict[str, tuple] = {}
        self.views: dict[str, np.ndarray] = {}
        self.checked = True
        self.raw_invoke = has_raw_invoke(self.interpreter)  # False: the public `invoke`

    def resize(self, shapes: dict[str, tuple]) -> bool:
        """Resizes the inputs and allocates; False (nothing done) when the shapes are as before."""
        if shapes == self.shapes:
            return False
        self.views = {}  # they point into the buffers that allocating frees
        for name, shape in shapes.items():
            self.interpreter.resize_tensor_input(self.inputs[name], shape, strict=False)
        with litert_lines_held():  # the first one logs that it made the XNNPACK delegate
            self.interpreter.allocate_tensors()
        self.shapes = shapes
        self.views = {n: self._view(n) for n, shape in shapes.items() if shape}
        self.checked = False
        return True

    def _view(self, name: str) -> np.ndarray:
        return self.interpreter.tensor(self.inputs[name])()

    def invoke(self) -> None:
        """Runs the graph. The held views are why `Interpreter.invoke`'s check (no view alive)
        is skipped where it can be: inputs live in the arena, which only `allocate_tensors`
        moves; a view that no longer points at its input (checked) is made again."""
        if not self.raw_invoke:
            names = list(self.views)
            self.views = {}
            self.interpreter.invoke()
            self.views = {n: self._view(n) for n in names}
            return
        self.interpreter._interpreter.Invoke()
        name = next(iter(self.views), None)
        if name is not None and not self.checked:
            self.checked = True
            if self._view(name).ctypes.data != self.views[name].ctypes.data:
                self.views = {n: self._view(n) for n in self.views}

    def output(self, index: int) -> np.ndarray:
        """A copy of the output `index`."""
        return self.interpreter.get_tensor(self.outputs[index])


class LiteRTTranslator(BaseTranslator):
    """Translates with a LiteRT version folder; `open_translator` returns it for such a folder.

    Args:
        folder: the version folder (`versions.find_version` finds it under a base path).
        config: the decoding (`DecodeConfig`); fields left at None take the export's
            (`max_new_tokens` at most the export's cache length).
        num_threads: the interpreters' threads (None: LiteRT's default).
    """

    def __init__(
        self,
        folder: str | Path,
        config: DecodeConfig | None = None,
        *,
        num_threads: int | None = None,
    ):
        self.folder = Path(folder)
        meta, self.config = open_export(
            self.folder, METADATA_FILE, EXPORT_AGAIN, config, f"the LiteRT export {self.folder}"
        )
        self.num_heads, self.depth = meta["num_heads"], meta["d_model"] // meta["num_heads"]
        languages = meta.get("languages", {})
        self.source_lang = languages.get("source", "pt")  # for the splitter
        self.target_lang = languages.get("target", "en")
        self.num_layers, self.cache_length = meta["num_layers"], meta["cache_length"]
        self.tokenizers = read_tokenizers(self.folder, meta)
        self.encoder = _Interpreter(self.folder / meta["encoder"], num_threads)
        self.step = _Interpreter(self.folder / meta["decoder_step"], num_threads)
        self.memory_names = [
            f"cross_{kind}_{i}" for i in range(self.num_layers) for kind in ("key", "value")
        ]
        self.cache_names = [
            f"self_{kind}_{i}" for i in range(self.num_layers) for kind in ("key", "value")
        ]
        self.description = (
            f"LiteRT {self.folder} ({meta['quantization']}, {decoding_mode(self.config)})"
        )

    def translate(self, sentences: list[str]) -> list[str]:
        """One translation per sentence (an empty one for a sentence with no tokens)."""
        return [texts[0] for texts in self._translate(sentences, None)]

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        return [distinct(texts)[:n] for texts in self._translate(sentences, n)]

    def _translate(self, sentences: list[str], n: int | None) -> list[list[str]]:
        """Each sentence's translations: the best (`n` None), or every beam of a search with
        `max(n, beam_size)` beams, best first ("" for a sentence with no tokens)."""
        ids = [self.source_ids(sentence) for sentence in sentences]
        full = [i for i, row in enumerate(ids) if len(row) > 2]
        texts = [[""] for _ in sentences]
        if full:
            width = max(len(ids[i]) for i in full)
            src = np.zeros((len(full), width), np.int32)
            for row, i in enumerate(full):
                src[row, : len(ids[i])] = ids[i]
            if n is None:
                beams = self.decode(src)[:, np.newaxis]
            else:
                beams = self.decode(src, max(n, self.config.beam_size), all_beams=True)
            for i, rows in zip(full, beams):
                texts[i] = [self.tokenizers["target"].detokenize(out) for out in rows]
        return texts

    def source_ids(self, sentence: str) -> list[int]:
        """[START] … [END], cut to `max_source_tokens` (END kept), as `Translator.source_ids`."""
        ids = self.tokenizers["source"].tokenize(sentence)
        return [START_ID, *ids[1:-1][: self.config.max_source_tokens - 2], END_ID]

    def decode(
        self,
        src: np.ndarray,
        beam_size: int | None = None,
        *,
        min_length: int = 0,
        all_beams: bool = False,
    ) -> np.ndarray:
        """int32 `(batch, src_len)` source ids -> int32 `(batch, len)` ids, START first, PAD
        after END (`DecodeOutput.ids`, trimmed to the longest); `all_beams`: every beam, best
        first, `(batch, beams, len)`. `min_length`: END is banned before this many tokens
        (benchmarks force a length with it)."""
        beam = self.config.beam_size if beam_size is None else beam_size
        batch, rows = src.shape[0], src.shape[0] * beam
        self.encoder.resize({"source_ids": src.shape})
        self.encoder.views["source_ids"][...] = src
        self.encoder.invoke()
        memory = [
            np.repeat(self.encoder.output(i), beam, axis=0)
            for i in range(1 + len(self.memory_names))
        ]
        cache = (rows, 1, self.num_heads, self.cache_positions(), self.depth)
        shapes = {"ids": (rows,), "step": (), "cross_bias": memory[0].shape}
        shapes.update({name: m.shape for name, m in zip(self.memory_names, memory[1:])})
        shapes.update(dict.fromkeys(self.cache_names, cache))
        new_buffers = self.step.resize(shapes)
        views = self.step.views
        if new_buffers:  # zeros, not garbage, in the masked positions
            for name in self.cache_names:
                views[name][...] = 0
        for name, value in zip(["cross_bias", *self.memory_names], memory):
            views[name][...] = value
        del views  # no view is held across `invoke` (`_Interpreter`)
        settings = self.config
        if beam == 1:
            ids = greedy(self.run_step, batch, settings.max_new_tokens, min_length)
            return ids[:, np.newaxis] if all_beams else ids
        return beam_search(
            self.run_step,
            batch,
            beam,
            settings.max_new_tokens,
            settings.length_penalty,
            min_length,
            all_beams=all_beams,
        )

    def cache_positions(self) -> int:
        """The positions the caches hold: `max_new_tokens` (attention reads every one), or the
        export's cache length for a step exported with a fixed one."""
        if self.step.signatures[self.cache_names[0]][3] < 0:
            return self.config.max_new_tokens
        return self.cache_length

    def run_step(self, ids: np.ndarray, step: int, parents: np.ndarray | None = None):
        """One decoder position for every row: the logits `(rows, vocab)`.

        `parents` (int `(rows,)`): first reorder the caches' positions before `step` so that
        row `r` continues the hypothesis of row `parents[r]`.
        """
        views = self.step.views
        if parents is not None and step > 0:
            moved = np.flatnonzero(parents != np.arange(len(parents)))
            if len(moved):
                source = parents[moved]
                for name in self.cache_names:
                    views[name][moved, :, :, :step] = views[name][source, :, :, :step]
        views["ids"][...] = ids
        # A scalar's view is a copy: set it.
        self.step.interpreter.set_tensor(self.step.inputs["step"], np.array(step, np.int32))
        del views  # no view is held across `invoke` (`_Interpreter`)
        self.step.invoke()
        views = self.step.views
        written = self.step.output(1).reshape(len(self.cache_names), -1, self.num_heads, self.depth)
        for name, position in zip(self.cache_names, written):
            views[name][:, 0, :, step] = position
        return self.step.output(0)
