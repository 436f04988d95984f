"""SavedModel export for TF Serving: text in, text out, no training code.

`export_run_dir` (the CLI's `export`) and `export_saved_model` write one numbered version of
TF Serving's model base path (`versions`), atomically, with its warm-up requests (`warmup`);
`ExportModule` is what gets saved: the tokenizers, the model's variables, and the Translator's
decoding functions behind three signatures (`serving_default`, `greedy`, `attention`), in graph
mode or XLA. The manual (layout, signatures and their outputs, XLA's bounded shapes, warm-up,
`saved_model_cli`) is docs/serving.md.

Example:
    >>> path = export_run_dir("runs/tiny", "saved_models/transformer")
    >>> loaded = tf.saved_model.load(str(path))
    >>> loaded.signatures["serving_default"](sentences=tf.constant(["olá ."]))["translations"]
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import tensorflow as tf

from tf_transformer.backends.savedmodel.signatures import (
    SENTENCE,
    SENTENCES,
    batch_outputs,
    pad_batch,
    tf_variable,
)
from tf_transformer.backends.savedmodel.translator import DECODING_FILE
from tf_transformer.backends.savedmodel.warmup import (
    WarmupRequest,
    signature_requests,
    write_warmup_requests,
)
from tf_transformer.backends.versions import check_version, write_version
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.inference.decoding.cached_decode import SRC_LENGTH_BUCKET

# Batch sizes an XLA export's warm-up compiles (each source bucket, serving_default and greedy);
# a request of another size is padded to the next power of two, compiled on first use if above.
DEFAULT_WARMUP_BATCH_SIZES = (1, 2, 4, 8, 16, 32)


class ExportModule(tf.Module):
    """What gets saved: tokenizers, model and the Translator's decoding functions; no optimizer.

    Args:
        tokenizers: a `Tokenizers` module (or a loaded one) with `.source` and `.target`.
        model: a `tf_transformer.model.Transformer`.
        config: the decoding baked into the graph (`DecodeConfig`; its defaults when None):
            `beam_size` of `serving_default` (1 makes it greedy too), `length_penalty`, and the
            caps `max_source_tokens` / `max_new_tokens`.
        jit_compile: decode with XLA (docs/serving.md); False: graph mode.
        warmup_batch_sizes: batch sizes (powers of two) the warm-up requests of an XLA export
            cover, each with every source bucket.
    """

    def __init__(
        self,
        tokenizers,
        model,
        config: DecodeConfig | None = None,
        *,
        jit_compile: bool = False,
        warmup_batch_sizes: tuple[int, ...] = DEFAULT_WARMUP_BATCH_SIZES,
    ):
        from tf_transformer.inference.translator import Translator

        super().__init__(name="transformer_export")
        bad = [n for n in warmup_batch_sizes if n < 1 or n & (n - 1)]
        if bad:
            raise InvalidValueError(f"warm-up batch sizes must be powers of two, got {bad}.")
        translator = Translator(tokenizers, model, config, jit_compile=jit_compile)
        # The Translator and the Keras model stay outside the tracked object graph: the
        # Translator caches its tf.functions in a dict with tuple keys (SavedModel cannot save
        # it), and saving a tracked Keras 3 model traces its call functions again (about half
        # the export time). What the graph needs is tracked: the tokenizers (tables, assets)
        # and the model's variables; the traced functions reach it through the signatures.
        self._untracked = types.SimpleNamespace(translator=translator, model=model, functions={})
        self.tokenizers = tokenizers
        # The tf.Variables inside the Keras 3 variables: a tracked Keras variable is exported as
        # a copy that the graph-mode loaders (TF Serving, saved_model_cli) never restore
        # ("Could not find variable ..."); tf.saved_model.load alone would not notice.
        self.model_variables = [tf_variable(v) for v in model.variables]
        self.config = translator.config  # resolved: every field set
        self.jit_compile = jit_compile
        self.warmup_batch_sizes = tuple(sorted(set(warmup_batch_sizes)))

    @property
    def translator(self):
        """The `Translator` whose functions the signatures call."""
        return self._untracked.translator

    @property
    def model(self):
        """The `Transformer` (its variables are tracked as `model_variables`)."""
        return self._untracked.model

    # Each signature checks its input's shape at run time (EnsureShape): a loaded signature
    # does not, and would run a 2-D batch as if it were flat.

    def _serve(self, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences = tf.ensure_shape(sentences, [None])
        return batch_outputs(self._translate_fn(self.config), sentences)

    def _greedy(self, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences = tf.ensure_shape(sentences, [None])
        return batch_outputs(self._translate_fn(self.config.replace(beam_size=1)), sentences)

    def _alternatives(self, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences = tf.ensure_shape(sentences, [None])
        translate = self._translate_fn(self.config, all_beams=True)

        def outputs():
            result = translate(sentences)
            return {"translations": result["text"], "alternatives": result["alternatives"]}

        def nothing():
            empty = tf.zeros([0], tf.string)
            return {
                "translations": empty,
                "alternatives": tf.zeros([0, self.config.beam_size], tf.string),
            }

        return tf.cond(tf.size(sentences) > 0, outputs, nothing)

    def _translate_fn(self, config: DecodeConfig, *, all_beams: bool = False):
        """The Translator's function; under XLA, on a batch padded to a power of two."""
        translate = self.translator.graph_fn(config, all_beams=all_beams)
        if not self.jit_compile:
            return translate

        def padded(sentences):
            # Each batch size is a new XLA compilation: round it up, so that a handful of
            # shapes (warmed up at load) serve every request.
            result = translate(pad_batch(sentences))
            return {name: value[: tf.size(sentences)] for name, value in result.items()}

        return padded

    def _attention(self, sentence: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences = tf.ensure_shape(sentence, [])[tf.newaxis]
        out = self.translator.graph_fn()(sentences)
        return {
            "translation": out["text"][0],
            **self.translator.attention_tensors(sentences, out["ids"]),
        }

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """The SavedModel signatures (traced on first use): name -> concrete function.

        `serving_default`, `greedy` and `alternatives` (every beam of `serving_default`'s
        search, best first) take `sentences` string `[None]`; `attention` takes `sentence`
        string `[]` (docs/serving.md lists the outputs).
        """
        functions = self._untracked.functions
        if not functions:
            # Not tf.function attributes of the module: `tf.saved_model.save` would trace those
            # a second time under its save context (a different trace-cache key). No AutoGraph:
            # graph code throughout (see `make_decode_fn`).
            functions["serving_default"] = tf.function(
                self._serve, input_signature=[SENTENCES], autograph=False
            )
            functions["greedy"] = tf.function(
                self._greedy, input_signature=[SENTENCES], autograph=False
            )
            functions["attention"] = tf.function(
                self._attention, input_signature=[SENTENCE], autograph=False
            )
            functions["alternatives"] = tf.function(
                self._alternatives, input_signature=[SENTENCES], autograph=False
            )
        return {name: fn.get_concrete_function() for name, fn in functions.items()}

    def source_buckets(self) -> list[int]:
        """Source lengths (ids, START and END included) that stand for every compiled shape:
        one per `SRC_LENGTH_BUCKET` bucket up to `config.max_source_tokens` (the last may be cut
        short)."""
        end = self.config.max_source_tokens  # the last source bucket's end
        ends = range(SRC_LENGTH_BUCKET, end + SRC_LENGTH_BUCKET, SRC_LENGTH_BUCKET)
        return [min(bucket, end) for bucket in ends]

    def warmup_requests(self) -> list[WarmupRequest]:
        """The requests TF Serving replays when it loads the export (`signature_requests`): XLA,
        every batch size of `warmup_batch_sizes` and every source bucket; graph mode, one
        sentence for each signature."""

        def count_tokens(sentence: str) -> int:
            return int(tf.shape(self.translator.source_ids(tf.constant([sentence])))[1])

        lengths = self.source_buckets() if self.jit_compile else self.source_buckets()[-1:]
        batch_sizes = self.warmup_batch_sizes if self.jit_compile else (1,)
        return signature_requests(count_tokens, lengths, batch_sizes)

    def export(
        self, base_dir: str | Path, version: int | None = None, *, check_ops: bool = True
    ) -> Path:
        """Writes version `version` (default: the next free one) under `base_dir` atomically:
        the SavedModel, its warm-up requests (`warmup_requests`) and `DECODING_FILE`. Returns the
        version directory; `check_ops` and the errors are as in `export_saved_model`."""

        def save(path: str) -> None:
            self.save(path)
            if check_ops:
                from tf_transformer.backends.savedmodel.graph_ops import check_serving_ops

                check_serving_ops(path)
            write_warmup_requests(path, Path(base_dir).name, self.warmup_requests())
            decoding = {**self.config.to_dict(), "jit_compile": self.jit_compile}
            (Path(path) / DECODING_FILE).write_text(json.dumps(decoding, indent=2) + "\n")

        return write_version(base_dir, version, save)

    def __call__(self, sentences, signature: str = "serving_default") -> dict[str, tf.Tensor]:
        """Runs one signature in process (as the loaded SavedModel would)."""
        return self.signatures()[signature](tf.convert_to_tensor(sentences, tf.string))

    def save(self, path: str | Path) -> None:
        """Writes the SavedModel (tag set `serve`) into `path`."""
        tf.saved_model.save(self, str(path), signatures=self.signatures())


def export_saved_model(
    tokenizers,
    model,
    base_dir: str | Path,
    *,
    version: int | None = None,
    config: DecodeConfig | None = None,
    jit_compile: bool = False,
    warmup_batch_sizes: tuple[int, ...] = DEFAULT_WARMUP_BATCH_SIZES,
    check_ops: bool = True,
) -> Path:
    """Exports `model` with `tokenizers` as version `version` of the model at `base_dir`.

    Args:
        tokenizers, model, config: as in `ExportModule`.
        jit_compile, warmup_batch_sizes: as in `ExportModule`.
        base_dir: TF Serving's model base path, e.g. ``saved_models/transformer``.
        version: a positive integer; None for the next free one.
        check_ops: refuse (ValueError, nothing written) a graph with ops a stock TF Serving
            2.12+ may not register (see `graph_ops.check_serving_ops`).

    Returns:
        The version directory.

    Raises:
        FileExistsError: the version exists (it is left untouched).
    """
    module = ExportModule(
        tokenizers,
        model,
        config,
        jit_compile=jit_compile,
        warmup_batch_sizes=warmup_batch_sizes,
    )
    return module.export(base_dir, version, check_ops=check_ops)


def export_run_dir(
    run_dir: str | Path,
    base_dir: str | Path,
    *,
    version: int | None = None,
    checkpoint: str | None = None,
    **options,
) -> Path:
    """Exports a run directory's tokenizers and checkpoint (see `export_saved_model`).

    Args:
        run_dir: the run directory (config.json, tokenizers/, checkpoints/).
        base_dir: the model base path.
        version: a positive integer; None for the next free one.
        checkpoint: "best", "averaged", "latest" or a prefix; None: best, else averaged, else
            latest (`RunDir.checkpoint`, which `RunDir.load_model` reads).
        **options: `config`, `jit_compile`, `warmup_batch_sizes`, `check_ops`.
    """
    from tf_transformer.backends.base import load_run

    check_version(base_dir, version)  # user errors before the slow part
    tokenizers, model = load_run(run_dir, checkpoint)
    return export_saved_model(tokenizers, model, base_dir, version=version, **options)
