r"""SavedModel export for TF Serving: text in, text out, no training code.

Layout (TF Serving's model base path; versions are positive integers, the server serves the
highest)::

    saved_models/NAME/
      1/  saved_model.pb  variables/  assets/source.pt.vocab  assets/target.en.vocab
          assets.extra/tf_serving_warmup_requests
      2/  ...

A version is written into a hidden sibling (``.tmp-2-XXXX``, which TF Serving ignores) and
renamed into place when complete, so a crash never leaves a half-written version; an existing
version is never overwritten.

Signatures (tag set ``serve``):

``serving_default`` (beam search, the export's `beam_size` and `length_penalty`) and ``greedy``:
    inputs:  ``sentences``  string ``[None]``: source-language sentences (raw text).
    outputs: ``translations`` string ``[None]``: target-language text (detokenized);
             ``scores`` float32 ``[None]``: beam search: length-normalised log-probability,
             greedy: the log-probability of the translation;
             ``tokens`` int64 ``[None, None]``: target ids, START (2) first, END (3) last, PAD (0)
             after END; at most ``max_new_tokens + 1`` columns.

``attention`` (one sentence, decoded like ``serving_default``):
    inputs:  ``sentence`` string ``[]``.
    outputs: ``translation`` string ``[]``; ``tokens`` int64 ``[None]`` (START … END);
             ``source_tokens`` string ``[src_len]`` (the wordpieces, [START] … [END]);
             ``target_tokens`` string ``[tgt_len]`` (the wordpieces after [START]: the tokens
             each attention row predicts, [END] last when decoding ended);
             ``attention_weights`` float32 ``[heads, tgt_len, src_len]``: the last decoder
             layer's cross-attention, teacher-forced on ``tokens``.

XLA (``jit_compile=True``): the encoder and the decoding loop of beam search (``serving_default``
and ``attention``) and of greedy decoding are one XLA cluster each (``_XlaMustCompile`` on the
function in the saved graph), compiled once per input shape. The shapes are bounded: the
source is padded to a multiple of ``SRC_LENGTH_BUCKET`` tokens (`make_decode_fn`), and the batch
to the next power of two (`pad_batch`; sliced off the outputs), so ``max_source_tokens`` 128 gives 8
source buckets and batches of 1-32 sentences 6 batch buckets. TF Serving runs such a model only
with ``--xla_cpu_compilation_enabled=true`` on CPU; without it every XLA compilation fails
("XLA compilation disabled"), and so does the load, at its warm-up. Without ``jit_compile`` the
graph is run op by op, every shape alike (no padding).

Warm-up (`warmup`): every export writes TF Serving warm-up requests. An XLA export gets one per
signature, source bucket and batch bucket up to ``warmup_batch_sizes`` (so the server compiles
every shape it will usually see while loading the version); a graph export gets one request per
signature (one run optimises the graph for all shapes).

Sources are cut to `max_source_tokens` tokens (keeping [END]) and at most `max_new_tokens` tokens
are generated, so any text gives a bounded answer; an empty batch gives empty outputs, an empty
sentence an empty translation. A non-string or wrongly shaped input is refused (a dtype error,
or EnsureShape's "Shape of tensor sentences [1,2] is not compatible with expected shape [?]"). The SavedModel needs only ``tensorflow`` and ``tensorflow_text``
to load (``import tensorflow_text`` registers the tokenizer ops; see `graph_ops` for the list
and for TF Serving compatibility).

``saved_model_cli`` (``show --dir DIR --all`` works as is) cannot ``run`` the model out of
the box: it loads the graph without importing ``tensorflow_text``, and fails with "Op type not
registered 'NormalizeUTF8'". Two ways that work: put the TF Text libraries in a
``tensorflow-plugins`` folder under a path containing ``site-packages`` (``import tensorflow``
loads every shared object there)::

    ops=$(python -c "import os, tensorflow_text as t; print(os.path.dirname(t.__file__))")
    mkdir -p /tmp/tftext/site-packages/tensorflow-plugins
    ln -s "$ops"/python/ops/_*.so /tmp/tftext/site-packages/tensorflow-plugins/
    PYTHONPATH=/tmp/tftext/site-packages saved_model_cli run --dir saved_models/NAME/1 \
        --tag_set serve --signature_def serving_default --input_exprs 'sentences=["olá ."]'

or call its entry point after importing TF Text::

    python -c "import sys, tensorflow_text; from tensorflow.python.tools.saved_model_cli import
    main; sys.argv[0] = 'saved_model_cli'; sys.exit(main())" run --dir ...  (one line)

Example:
    >>> path = export_run_dir("runs/tiny", "saved_models/transformer")
    >>> loaded = tf.saved_model.load(str(path))
    >>> loaded.signatures["serving_default"](sentences=tf.constant(["olá ."]))["translations"]
"""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path

import numpy as np
import tensorflow as tf

from tf_transformer.config import DecodeConfig
from tf_transformer.inference.decoding import SRC_LENGTH_BUCKET
from tf_transformer.inference.versions import check_version, write_version
from tf_transformer.inference.warmup import (
    WarmupRequest,
    sentence_of_length,
    write_warmup_requests,
)

# The decoding settings baked into an export, beside its warm-up requests: `open_translator`
# reads them to refuse flags the export cannot honour (TF Serving ignores the file).
DECODING_FILE = "assets.extra/tf_transformer_decoding.json"
# Batch sizes an XLA export's warm-up compiles (each source bucket, serving_default and greedy);
# a request of another size is padded to the next power of two, compiled on first use if above.
DEFAULT_WARMUP_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
DECODE_FIELDS = tuple(field.name for field in dataclasses.fields(DecodeConfig))
SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
SENTENCE = tf.TensorSpec([], tf.string, name="sentence")


class ExportModule(tf.Module):
    """What gets saved: tokenizers, model and the Translator's decoding functions; no optimizer.

    Args:
        tokenizers: a `Tokenizers` module (or a loaded one) with `.source` and `.target`.
        model: a `tf_transformer.model.Transformer`.
        config: the decoding baked into the graph (`DecodeConfig`; its defaults when None):
            `beam_size` of `serving_default` (1 makes it greedy too), `length_penalty`, and the
            caps `max_source_tokens` / `max_new_tokens`.
        jit_compile: decode with XLA (see the module docstring); False: graph mode.
        warmup_batch_sizes: batch sizes (powers of two) the warm-up requests of an XLA export
            cover, each with every source bucket.
        **deprecated: `beam_size=`, `length_penalty=`, `max_source_tokens=`, `max_new_tokens=`,
            the old spellings of `config`'s fields (each says once that it is deprecated).
    """

    def __init__(
        self,
        tokenizers,
        model,
        config: DecodeConfig | None = None,
        *,
        jit_compile: bool = False,
        warmup_batch_sizes: tuple[int, ...] = DEFAULT_WARMUP_BATCH_SIZES,
        **deprecated,
    ):
        from tf_transformer.inference.translator import Translator

        super().__init__(name="transformer_export")
        bad = [n for n in warmup_batch_sizes if n < 1 or n & (n - 1)]
        if bad:
            raise ValueError(f"warm-up batch sizes must be powers of two, got {bad}.")
        config = DecodeConfig.with_keywords(config, "ExportModule", deprecated)
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
        self.model_variables = [_tf_variable(v) for v in model.variables]
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
        return _batch_outputs(self._translate_fn(self.config), sentences)

    def _greedy(self, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
        sentences = tf.ensure_shape(sentences, [None])
        return _batch_outputs(self._translate_fn(self.config.replace(beam_size=1)), sentences)

    def _translate_fn(self, config: DecodeConfig):
        """The Translator's function; under XLA, on a batch padded to a power of two."""
        translate = self.translator.graph_fn(config)
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
        ids = out["ids"]  # (1, len): START, tokens, END, PAD...
        generated = tf.reduce_sum(tf.cast(ids[0, 1:] > 0, tf.int32))  # END included
        decoder_in = ids[:, : tf.maximum(generated, 1)]  # START and all but the last token
        src = self.translator.source_ids(sentences)
        _, weights = self.model.call_with_attention((src, decoder_in), training=False)
        return {
            "translation": out["text"][0],
            "tokens": ids[0, : generated + 1],
            "source_tokens": self.tokenizers.source.lookup(src)[0],
            "target_tokens": self.tokenizers.target.lookup(ids[:, 1 : generated + 1])[0],
            "attention_weights": weights["cross"][-1][0],  # (heads, tgt_len, src_len)
        }

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """The SavedModel signatures (traced on first use): name -> concrete function.

        `serving_default` and `greedy` take `sentences` string `[None]`; `attention` takes
        `sentence` string `[]` (see the module docstring for the outputs).
        """
        functions = self._untracked.functions
        if not functions:
            # Not tf.function attributes of the module: `tf.saved_model.save` would trace those
            # a second time under its save context (a different trace-cache key).
            functions["serving_default"] = tf.function(self._serve, input_signature=[SENTENCES])
            functions["greedy"] = tf.function(self._greedy, input_signature=[SENTENCES])
            functions["attention"] = tf.function(self._attention, input_signature=[SENTENCE])
        return {name: fn.get_concrete_function() for name, fn in functions.items()}

    def source_buckets(self) -> list[int]:
        """Source lengths (ids, START and END included) that stand for every compiled shape:
        one per `SRC_LENGTH_BUCKET` bucket up to `source_buckets_end` (the last may be cut
        short)."""
        end = self.config.max_source_tokens  # the last source bucket's end
        ends = range(SRC_LENGTH_BUCKET, end + SRC_LENGTH_BUCKET, SRC_LENGTH_BUCKET)
        return [min(bucket, end) for bucket in ends]

    def warmup_requests(self) -> list[WarmupRequest]:
        """The requests TF Serving replays when it loads the export (see the module docstring).

        XLA: `serving_default` and `greedy` for every batch size of `warmup_batch_sizes` and
        every source bucket, then `attention` for every source bucket. Graph mode: one sentence
        for each signature.
        """

        def count_tokens(sentence: str) -> int:
            return int(tf.shape(self.translator.source_ids(tf.constant([sentence])))[1])

        lengths = self.source_buckets() if self.jit_compile else self.source_buckets()[-1:]
        sentences = [sentence_of_length(count_tokens, length).encode() for length in lengths]
        batch_sizes = self.warmup_batch_sizes if self.jit_compile else (1,)
        requests = [
            WarmupRequest(name, {"sentences": np.array([sentence] * batch, dtype=object)})
            for name in ("serving_default", "greedy")
            for batch in batch_sizes
            for sentence in sentences
        ]
        requests += [
            WarmupRequest("attention", {"sentence": np.array(sentence, dtype=object)})
            for sentence in sentences
        ]
        return requests

    def export(
        self, base_dir: str | Path, version: int | None = None, *, check_ops: bool = True
    ) -> Path:
        """Writes version `version` (default: the next free one) under `base_dir` atomically.

        Args:
            base_dir: TF Serving's model base path, e.g. ``saved_models/transformer``.
            version: a positive integer; None for the next free one.
            check_ops: refuse (ValueError, nothing written) a graph with ops a stock TF
                Serving 2.12+ may not register (see `graph_ops.check_serving_ops`).

        The version holds the SavedModel and its warm-up requests
        (``assets.extra/tf_serving_warmup_requests``, `warmup_requests`).

        Returns:
            The version directory.

        Raises:
            FileExistsError: the version exists (it is left untouched).
        """

        def save(path: str) -> None:
            self.save(path)
            if check_ops:
                from tf_transformer.inference.graph_ops import check_serving_ops

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


def _tf_variable(variable) -> tf.Variable:
    """The `tf.Variable` behind a Keras 3 variable (or `variable` itself)."""
    inner = getattr(variable, "value", variable)
    return inner if isinstance(inner, tf.Variable) else variable


def pad_batch(sentences: tf.Tensor) -> tf.Tensor:
    """`sentences` `(batch,)` padded to the next power of two rows (`batch` > 0).

    The extra rows repeat the first sentence: they decode exactly as long as it does, so they
    neither lengthen the decoding loop nor widen the ids of the real rows.
    """
    batch = tf.size(sentences)
    powers = tf.constant([2**i for i in range(31)], tf.int32)
    bucket = tf.gather(powers, tf.reduce_sum(tf.cast(powers < batch, tf.int32)))
    rows = tf.concat([tf.range(batch), tf.zeros([bucket - batch], tf.int32)], axis=0)
    return tf.gather(sentences, rows)


def _batch_outputs(translate, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
    """The serving outputs of `translate` (a `Translator.graph_fn`); an empty batch is answered
    without decoding (the encoder cannot run on a `(0, 0)` source)."""

    def outputs():
        result = translate(sentences)
        return {
            "translations": result["text"],
            "scores": tf.cast(result["scores"], tf.float32),
            "tokens": tf.cast(result["ids"], tf.int64),
        }

    def nothing():
        return {
            "translations": tf.zeros([0], tf.string),
            "scores": tf.zeros([0], tf.float32),
            "tokens": tf.zeros([0, 0], tf.int64),
        }

    return tf.cond(tf.size(sentences) > 0, outputs, nothing)


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
    **deprecated,
) -> Path:
    """Exports `model` with `tokenizers` as version `version` of the model at `base_dir`.

    Args:
        tokenizers, model, config: as in `ExportModule`.
        jit_compile, warmup_batch_sizes, **deprecated: as in `ExportModule`.
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
        DecodeConfig.with_keywords(config, "export_saved_model", deprecated),
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
        **options: `config`, `jit_compile`, `warmup_batch_sizes`, `check_ops` (and the
            deprecated `beam_size`, `length_penalty`, `max_source_tokens`, `max_new_tokens`).
    """
    from tf_transformer.run_dir import RunDir

    run = RunDir(run_dir)
    run.read_config()  # a clear error for a directory that is not a run
    # User errors before the slow part.
    check_version(base_dir, version)
    keywords = {name: options.pop(name) for name in DECODE_FIELDS if name in options}
    options["config"] = DecodeConfig.with_keywords(
        options.get("config"), "export_run_dir", keywords
    )
    tokenizers = run.load_tokenizers()
    model = run.load_model(checkpoint)
    return export_saved_model(tokenizers, model, base_dir, version=version, **options)
