r"""LiteRT export: the encoder and the one-token decoder step as two ``.tflite`` files.

Layout (a version folder under a base path, as the SavedModel export)::

    saved_models/NAME-litert/
      1/  encoder.tflite  decoder_step.tflite  source.vocab  target.vocab  litert.json

Builtin LiteRT ops only (no Flex, no custom ops): the files run with ``ai-edge-litert`` alone,
from Python (`backends.litert.runtime`) or a phone app. Each file is one tf.function converted
with its weights frozen (``experimental_lower_to_saved_model=False``: else Keras 3 weights stay
``READ_VARIABLE`` ops and int8 quantizes nothing); ``--quantization int8`` is dynamic-range
quantization (int8 weights, float activations).

``encoder.tflite``, one call per batch:
    input ``source_ids`` int32 ``[batch, src_len]`` ([START] … [END], PAD = 0 after);
    outputs, in order: ``cross_bias`` float32 ``[batch, 1, 1, 1, src_len]`` (-1e9 at PAD), then
    per layer ``cross_key_i``, ``cross_value_i`` float32 ``[batch, 1, heads, src_len, depth]``.

``decoder_step.tflite``, one call per generated token; `rows` = batch × beams, sentence-major:
    inputs: ``ids`` int32 ``[rows]`` (the tokens at position ``step``: START at 0);
    ``step`` int32 ``[]``; ``cross_bias`` and per layer ``cross_key_i``, ``cross_value_i`` (the
    encoder's, each sentence's row repeated per beam); per layer ``self_key_i``,
    ``self_value_i`` float32 ``[rows, 1, heads, positions, depth]``, the self-attention
    cache, ``positions`` any length from ``step + 1`` to ``cache_length`` (attention reads
    every position, so a runtime holds as many as its calls decode at most: `max_new_tokens`)
    (zeros at the start; positions after ``step`` are ignored);
    outputs, in order: ``logits`` float32 ``[rows, target_vocab]`` (for position ``step + 1``),
    then ``written`` float32 ``[2 * num_layers, rows, d_model]``: the keys and values of
    position ``step`` (layer 0's key, its value, layer 1's key, ...), which the caller writes
    into its caches (``self_key_i[:, 0, :, step, :] = written[2 * i].reshape(rows, heads,
    depth)``) before the next step.

The step runs the decoder's own layers (`Transformer.decode_step`) through the ``litert`` cache
layout (`backends.litert.layout`): the cache is a fixed-size tensor written with
DYNAMIC_UPDATE_SLICE, and the step returns only the new position, so a runtime keeps the caches
in the interpreter's input buffers and writes one position per step (nothing the size of the
cache crosses the interface).

``litert.json`` holds what a runtime needs: the files (with their sizes and SHA-256, so a torn
copy is refused), the special ids, the caps (``max_source_tokens``, ``max_new_tokens`` = the
cache length), the languages, each tokenizer's vocabulary file, lower-casing and truecasing
words (`text.plain` states the tokenizer contract), and the decoding defaults.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tensorflow as tf

from tf_transformer.backends.export_files import file_entries, write_metadata, write_tokenizers
from tf_transformer.backends.litert.layout import LiteRTLayout
from tf_transformer.backends.litert.runtime import METADATA_FILE
from tf_transformer.backends.versions import check_version, write_version
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.layers.cache_layout import LayerCache
from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID, UNK_ID

ENCODER_FILE = "encoder.tflite"
STEP_FILE = "decoder_step.tflite"
QUANTIZATIONS = ("none", "int8")
FORMAT_VERSION = 1


def _cross_names(num_layers: int) -> list[str]:
    return [f"cross_{kind}_{i}" for i in range(num_layers) for kind in ("key", "value")]


def encoder_function(model, cache_length: int):
    """The concrete encoder function: `source_ids` -> cross bias, every layer's keys/values."""

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False
    )
    def encode(source_ids):
        context, padding_mask = model.encode(source_ids)
        layout = LiteRTLayout(model.config.num_heads, model.config.d_model)
        state = model.start_decoding(context, padding_mask, cache_length, layout)
        return (state.cross_bias, *[t for memory in state.cross for t in memory])

    return encode.get_concrete_function()


def step_function(model, cache_length: int):
    """The concrete decoder step (see the module docstring for its inputs and outputs)."""
    layers, heads = model.config.num_layers, model.config.num_heads
    depth, dtype = model.config.d_model // heads, model.compute_dtype
    cache = [f"self_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    specs = [
        tf.TensorSpec([None], tf.int32, name="ids"),
        tf.TensorSpec([], tf.int32, name="step"),
        tf.TensorSpec([None, 1, 1, 1, None], dtype, name="cross_bias"),
        *[
            tf.TensorSpec([None, 1, heads, None, depth], dtype, name=n)
            for n in _cross_names(layers)
        ],
        # Any length up to cache_length: a runtime sizes the caches to its calls' cap.
        *[tf.TensorSpec([None, 1, heads, None, depth], dtype, name=n) for n in cache],
    ]

    @tf.function(input_signature=specs, autograph=False)
    def step(ids, step, cross_bias, *tensors):
        memories, caches = tensors[: 2 * layers], tensors[2 * layers :]
        # The state's weights and mask rows; its cross-attention part is made from a stand-in
        # context, replaced by the inputs (and, unused, pruned by the converter).
        stand_in = tf.zeros([1, 1, model.config.d_model], dtype)
        layout = LiteRTLayout(heads, model.config.d_model)
        state = model.start_decoding(stand_in, tf.zeros([1, 1, 1, 1]), cache_length, layout)
        state = dataclasses.replace(
            state,
            cache=[LayerCache(*pair) for pair in zip(caches[::2], caches[1::2])],
            cross=list(zip(memories[::2], memories[1::2])),
            cross_bias=cross_bias,
            # The look-ahead rows cut to the positions given (tf.slice: a Python slice of a
            # dynamic shape needs Flex ops).
            self_bias=tf.slice(state.self_bias, [0, 0], [-1, tf.shape(caches[0])[3]]),
        )
        logits, state = model.decode_step(ids, step, state)
        # One output, position `step` of every cache as (rows, d_model): one read per step.
        written = [tf.gather(t, step, axis=3) for pair in state.cache for t in pair]
        return logits, tf.reshape(tf.stack(written), (len(written), -1, model.config.d_model))

    return step.get_concrete_function()


def check_quantization(quantization: str) -> None:
    """Refuses a quantization that is not one of `QUANTIZATIONS`, in one line."""
    if quantization not in QUANTIZATIONS:
        raise InvalidValueError(
            f"--quantization {quantization}: --format litert takes {' or '.join(QUANTIZATIONS)}."
        )


def convert(concrete_function, model, quantization: str = "none") -> bytes:
    """A concrete function as a LiteRT flatbuffer: builtin ops, weights frozen; `"int8"`:
    dynamic-range quantization."""
    check_quantization(quantization)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete_function], model)
    converter.experimental_lower_to_saved_model = False  # freeze the weights (module docstring)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def export_litert(
    tokenizers,
    model,
    base_dir: str | Path,
    *,
    version: int | None = None,
    quantization: str = "none",
    config: DecodeConfig | None = None,
) -> Path:
    """Writes a LiteRT version folder (see the module docstring) under `base_dir`, atomically.

    Args:
        tokenizers: with `.source` and `.target` (built or loaded).
        model: a `Transformer` (float32 weights are written; mixed-precision models too).
        base_dir: the base path; versions are numbered folders, never overwritten.
        version: a positive integer; None for the next free one.
        quantization: "none" (float32) or "int8" (dynamic range).
        config: decoding defaults recorded for the runtime; its caps (resolved against the
            model's `max_length`) fix the source cap and the cache length.

    Returns:
        The version folder.
    """
    check_quantization(quantization)
    check_version(base_dir, version)
    config = (config or DecodeConfig()).resolved(model.config.max_length)
    model.build()
    cache_length = config.max_new_tokens
    files = {
        ENCODER_FILE: convert(encoder_function(model, cache_length), model, quantization),
        STEP_FILE: convert(step_function(model, cache_length), model, quantization),
    }

    def save(path: str) -> None:
        folder = Path(path)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        tokenizer_entries = write_tokenizers(folder, tokenizers)
        vocabs = [tokenizer_entries[role]["vocab"] for role in ("source", "target")]
        metadata = {
            "format": FORMAT_VERSION,
            "quantization": quantization,
            "files": file_entries(folder, [*files, *vocabs]),
            "encoder": ENCODER_FILE,
            "decoder_step": STEP_FILE,
            "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "start": START_ID, "end": END_ID},
            **tokenizer_entries,
            "num_layers": model.config.num_layers,
            "num_heads": model.config.num_heads,
            "d_model": model.config.d_model,
            "target_vocab_size": model.config.target_vocab_size,
            "cache_length": cache_length,
            "decoding": config.to_dict(),
        }
        write_metadata(folder, METADATA_FILE, metadata)

    return write_version(base_dir, version, save)


def export_litert_run_dir(
    run_dir: str | Path,
    base_dir: str | Path,
    *,
    version: int | None = None,
    checkpoint: str | None = None,
    quantization: str | None = None,
    config: DecodeConfig | None = None,
) -> Path:
    """`export_litert` of a run directory's tokenizers and checkpoint (`RunDir.checkpoint`);
    `quantization` None is "none"."""
    from tf_transformer.backends.base import load_run

    quantization = quantization or "none"
    check_quantization(quantization)
    check_version(base_dir, version)  # user errors before the slow part
    tokenizers, model = load_run(run_dir, checkpoint)
    return export_litert(
        tokenizers, model, base_dir, version=version, quantization=quantization, config=config
    )
