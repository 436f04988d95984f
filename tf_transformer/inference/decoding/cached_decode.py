"""Decoding with a `Transformer`: the model adapter behind the search strategies.

`model_logits_fn` turns a model and a batch of sources into the `logits_fn(ids, step, cache)`
seam (encoder once, key/value cache); `make_decode_fn` wraps a strategy (greedy or beam search,
`decoding.greedy` / `decoding.beam`) and the adapter into one `tf.function`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.inference.decoding.beam import beam_search
from tf_transformer.inference.decoding.greedy import greedy_decode
from tf_transformer.inference.decoding.search import DecodeOutput, LogitsFn, trim, write_column
from tf_transformer.layers.cache_layout import LayerCache
from tf_transformer.layers.kv_cache import GraphLayout, XlaLayout
from tf_transformer.text.special_tokens import PAD_ID

# XLA-compiled decoding pads the source to a multiple of this, bounding the compiled shapes.
SRC_LENGTH_BUCKET = 16
# The step layouts by name: "graph" runs in graph mode only (XLA compiles its in-place write at
# constant positions only). A `CacheLayout` class is taken too (`backends.litert.layout`'s).
LAYOUTS = {"graph": GraphLayout, "xla": XlaLayout}


def pad_to_multiple(ids: tf.Tensor, multiple: int, limit: int | None = None) -> tf.Tensor:
    """Right-pads `ids` `(batch, len)` with PAD to the next multiple of `multiple` columns, or
    to `limit` columns when that comes first (the positional table ends there)."""
    length = tf.shape(ids)[1]
    target = (length + multiple - 1) // multiple * multiple
    if limit is not None:
        target = tf.maximum(tf.minimum(target, limit), length)
    return tf.pad(ids, [[0, 0], [0, target - length]], constant_values=PAD_ID)


def model_logits_fn(
    model, src: tf.Tensor, max_new_tokens: int, *, layout="graph"
) -> tuple[LogitsFn, list[LayerCache]]:
    """The cached seam for a `Transformer`: the encoder and cross-attention K/V run once.

    Args:
      model: a `tf_transformer.model.Transformer`.
      src: int `(batch, src_len)` source ids, PAD = 0.
      max_new_tokens: decoder positions the fixed-size self-attention cache holds.
      layout: the step's cache layout: "graph" (per-head caches, batched matmuls), "xla" (heads
        merged, attention as products and sums), or a `CacheLayout` class (the LiteRT export's),
        built as `layout(num_heads, d_model)`.

    Returns:
      `(logits_fn, initial_cache)`: the cache is the `DecodingState`'s, each layer's
      self-attention keys and values (`batch` rows; beam search tiles and reorders them). The
      rest of the state (cross-attention keys and values per sentence, the weights read once,
      the masks) is closed over.
    """
    if max_new_tokens > model.config.max_length:
        raise InvalidValueError(
            f"max_new_tokens {max_new_tokens} exceeds the model's positional table "
            f"(max_length {model.config.max_length})."
        )
    if isinstance(layout, str):
        if layout not in LAYOUTS:
            raise InvalidValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}.")
        layout = LAYOUTS[layout]
    context, padding_mask = model.encode(src)
    layout = layout(model.config.num_heads, model.config.d_model)
    state = model.start_decoding(context, padding_mask, max_new_tokens, layout)

    def logits_fn(ids, step, cache):
        logits, stepped = model.decode_step(ids, step, dataclasses.replace(state, cache=cache))
        return logits, stepped.cache

    return logits_fn, state.cache


def recompute_logits_fn(model, src: tf.Tensor, max_new_tokens: int) -> tuple[LogitsFn, Any]:
    """The reference seam: re-runs `model((src, prefix))` on the whole prefix at every step.

    Slow (quadratic work, the encoder every step) but obviously right; tests compare the cached
    seam with it. The prefix lives in the cache, `{"src", "prefix" (batch, max_new_tokens)}`, so
    beam search reorders it with the beams like any other cache tensor.
    """
    cache = {"src": src, "prefix": tf.zeros([tf.shape(src)[0], max_new_tokens], tf.int32)}

    def logits_fn(ids, step, cache):
        prefix = write_column(cache["prefix"], step, ids)
        logits = model((cache["src"], prefix[:, : step + 1]), training=False)
        return logits[:, -1], {"src": cache["src"], "prefix": prefix}

    return logits_fn, cache


def make_decode_fn(
    model,
    *,
    max_new_tokens: int,
    beam_size: int = 1,
    length_penalty: float = DecodeConfig.DEFAULT_LENGTH_PENALTY,
    min_length: int = 0,
    return_all_beams: bool = False,
    jit_compile: bool = False,
    recompute: bool = False,
    step_layout: str | type | None = None,
) -> Callable[[tf.Tensor], DecodeOutput]:
    """A `tf.function` `src (batch, src_len) int64 -> DecodeOutput` decoding with `model`.

    Args:
      model: a `Transformer`.
      max_new_tokens: most generated tokens (END included).
      beam_size: 1 for greedy decoding, else beam search with this many beams.
      length_penalty: GNMT length-penalty exponent (beam search only).
      min_length: END banned before this many tokens.
      return_all_beams: beam search returns `(batch, beam, ...)` fields, best first.
      jit_compile: compile encoder + decoding loop with XLA. XLA compiles once per input shape,
        so the source is padded to a multiple of `SRC_LENGTH_BUCKET` first (PAD is masked: the
        output does not change); each batch size still compiles once.
      recompute: use the reference `recompute_logits_fn` (no cache; cannot be XLA-compiled).
      step_layout: the decoding step's cache layout (`model_logits_fn`'s `layout`: a name or a
        `CacheLayout` class); by default "xla" with `jit_compile`, else "graph" (each is the
        faster one there).
    """
    if step_layout is None:
        step_layout = "xla" if jit_compile else "graph"
    if jit_compile and not recompute and step_layout in ("graph", GraphLayout):
        raise InvalidValueError(
            "step_layout 'graph' runs without XLA only (XLA compiles its in-place write at "
            "constant positions): under jit_compile use 'xla', or its storage as LiteRT writes it "
            "(backends.litert.layout.LiteRTLayout)."
        )

    def decode(src):
        if recompute:
            logits_fn, cache = recompute_logits_fn(model, src, max_new_tokens)
        else:
            logits_fn, cache = model_logits_fn(model, src, max_new_tokens, layout=step_layout)
        batch = tf.shape(src)[0]
        if beam_size == 1:
            return greedy_decode(
                logits_fn, cache, batch, max_new_tokens, min_length=min_length, trim_ids=False
            )
        return beam_search(
            logits_fn,
            cache,
            batch,
            beam_size,
            max_new_tokens,
            length_penalty,
            min_length=min_length,
            return_all_beams=return_all_beams,
            trim_ids=False,
        )

    # autograph=False here and in the functions that wrap this one (Translator, export): the
    # decoding is graph code already (tf.while_loop, tf.cond), so AutoGraph would only re-read
    # it at every trace; without it the graph is the same and a first translation traces in
    # less than half the CPU time.
    core = tf.function(decode, jit_compile=jit_compile and not recompute, autograph=False)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)], autograph=False)
    def decode_fn(src):
        if jit_compile and not recompute:
            src = pad_to_multiple(src, SRC_LENGTH_BUCKET, limit=model.config.max_length)
        return trim(core(src))

    return decode_fn
