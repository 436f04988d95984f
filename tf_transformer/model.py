"""The encoder-decoder Transformer as a Keras model: ids in, logits out."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tf_transformer.config import ModelConfig
from tf_transformer.layers.attention import dense_step, read_weight
from tf_transformer.layers.decoder import Decoder
from tf_transformer.layers.encoder import Encoder
from tf_transformer.layers.xla_step import STEP_LAYOUTS
from tf_transformer.masks import (
    create_look_ahead_mask,
    create_masks,
    create_padding_mask,
    mask_to_bias,
)

# The `ModelConfig` fields the encoder and decoder stacks take (besides their vocabulary size).
STACK_ARGUMENTS = (
    "num_layers",
    "d_model",
    "num_heads",
    "dff",
    "dropout_rate",
    "max_length",
    "norm_first",
    "positional_layout",
    "attention_dropout",
    "activation_dropout",
    "word_dropout",
)


def tie_token_embeddings(encoder: Encoder, decoder: Decoder) -> None:
    """Makes `decoder` embed its ids with `encoder`'s token embedding layer (before building).

    The decoder's own, still unbuilt, Embedding is dropped from Keras' tracking, so the model
    has one embedding matrix: `model.weights` and checkpoints hold it once, under the encoder.
    """
    if encoder.vocab_size != decoder.vocab_size:
        raise ValueError(
            f"share_embeddings needs one vocabulary: input_vocab_size ({encoder.vocab_size}) "
            f"!= target_vocab_size ({decoder.vocab_size}). Train with a shared vocabulary "
            "(shared_vocab, --shared-vocab)."
        )
    target = decoder.embedding
    target._tracker.untrack(target.embedding)  # Keras 3 keeps a replaced layer tracked
    target.embedding = encoder.embedding.embedding


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Transformer(tf.keras.Model):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    `model((src, tgt_in))` returns the logits and nothing else. Decoding strategies (greedy,
    beam search) live in `tf_transformer.inference` and drive the model through `encode`,
    `initial_cache`, `step_constants` and `decode_step`; attention weights for plots come from
    `call_with_attention`. Masks are built inside from PAD = 0 (**1.0 = masked**) and passed
    explicitly to every layer.

    Keyword arguments are the fields of `ModelConfig` (same names, defaults and validation;
    the defaults are the paper's base model), plus those of `tf.keras.Model` (`name`, `dtype`).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate: paper sizes.
      attention_dropout, activation_dropout, word_dropout: extra dropouts (0 = off).
      input_vocab_size, target_vocab_size: vocabulary sizes (id 0 is PAD).
      max_length: positions of the sinusoid tables.
      norm_first: pre-norm instead of the paper's post-norm.
      positional_layout: "interleaved" (paper) or "concat" (tutorial).
      share_target_embeddings: the output projection reuses the target embedding matrix.
      share_embeddings: one matrix embeds source and target tokens and makes the output
        projection (three-way tying, Press & Wolf 2017; needs one shared vocabulary).

    Call arguments:
      inputs: `(src, tgt_in)`, int `(batch, src_len)` and `(batch, tgt_len)`.
      training: dropout on when True.

    Returns:
      float32 logits `(batch, tgt_len, target_vocab_size)`.

    Example:
      >>> model = Transformer.from_config(get_preset("tiny").replace(input_vocab_size=50,
      ...                                                             target_vocab_size=60))
      >>> model((tf.constant([[5, 6, 3]]), tf.constant([[2, 9]]))).shape
      TensorShape([1, 2, 60])
    """

    def __init__(self, **kwargs):
        # The hyperparameters are the fields of `ModelConfig` (one definition of their names,
        # defaults and validation); everything else goes to `tf.keras.Model`.
        fields = {field.name for field in dataclasses.fields(ModelConfig)}
        config = ModelConfig(**{name: kwargs.pop(name) for name in fields & set(kwargs)})
        super().__init__(**kwargs)
        self.config = config
        for name, value in dataclasses.asdict(config).items():
            setattr(self, name, value)
        stack = {name: getattr(config, name) for name in STACK_ARGUMENTS}
        stack["dtype"] = self.dtype_policy
        self.encoder = Encoder(vocab_size=config.input_vocab_size, name="encoder", **stack)
        self.decoder = Decoder(vocab_size=config.target_vocab_size, name="decoder", **stack)
        if config.share_embeddings:
            tie_token_embeddings(self.encoder, self.decoder)
        self.final_layer = None
        if not (config.share_target_embeddings or config.share_embeddings):
            self.final_layer = tf.keras.layers.Dense(
                config.target_vocab_size, name="final_layer", dtype=self.dtype_policy
            )

    def build(self, input_shape=None):
        # Every weight exists after build(), so loading weights (`load_model`, checkpoints,
        # BackupAndRestore) needs no real batch first. Building twice would add weights twice.
        if self.built:
            return
        self.encoder.build()
        self.decoder.build()
        if self.final_layer is not None:
            self.final_layer.build((None, None, self.d_model))
        self.built = True

    def call(self, inputs, training=None):
        src, tgt_in = inputs
        logits, _ = self._logits_and_attention(src, tgt_in, training=training)
        return logits

    def call_with_attention(self, inputs, training=False):
        """Logits plus every attention map, for plots and inspection.

        Returns:
          `(logits, attention)` where attention has lists (one tensor per layer) under
          `"encoder_self"` `(batch, heads, src_len, src_len)`, `"decoder_self"`
          `(batch, heads, tgt_len, tgt_len)` and `"cross"` `(batch, heads, tgt_len, src_len)`.
        """
        src, tgt_in = inputs
        return self._logits_and_attention(src, tgt_in, training=training)

    def _logits_and_attention(self, src, tgt_in, training):
        padding_mask, combined_mask = create_masks(src, tgt_in)
        context, encoder_weights = self.encoder(src, padding_mask=padding_mask, training=training)
        x, decoder_weights = self.decoder(
            tgt_in, context, self_mask=combined_mask, cross_mask=padding_mask, training=training
        )
        attention = {
            "encoder_self": encoder_weights,
            "decoder_self": decoder_weights["self"],
            "cross": decoder_weights["cross"],
        }
        return self.project(x), attention

    def project(self, x):
        """Decoder output `(..., d_model)` -> float32 logits `(..., target_vocab_size)`."""
        if self.final_layer is not None:
            logits = self.final_layer(x)
        else:
            table = self.decoder.embedding.embedding.embeddings
            logits = tf.matmul(x, tf.cast(table, x.dtype), transpose_b=True)
        return tf.cast(logits, tf.float32)

    # The incremental-decoding seam used by tf_transformer.inference.decoding: `encode` once,
    # `initial_cache` and `step_constants` once per decoding call, `decode_step` per token.

    def encode(self, src, training=False):
        """Runs the encoder once: returns `(context, padding_mask)`."""
        padding_mask = create_padding_mask(src)
        context, _ = self.encoder(src, padding_mask=padding_mask, training=training)
        return context, padding_mask

    def initial_cache(self, context, padding_mask, cache_length, *, layout="graph"):
        """The decoding caches, split by what changes during decoding.

        Args:
          context, padding_mask: from `encode`.
          cache_length: decoder positions the self-attention cache holds.
          layout: the step's cache layout, "graph" or "xla" (see `step_constants`).

        Returns:
          `(self_cache, cross)`. `self_cache` changes at every step and follows the hypotheses
          (a beam search reorders it): one `{"key", "value"}` per layer,
          `(batch, heads, cache_length, depth)`, zeros. `cross` is fixed per sentence:
          `{"layers": [{"key", "value"}, ...], "bias": (batch, 1, 1, 1, src_len)}`, the
          cross-attention keys/values computed here, once (see `Decoder.initial_cache`), and
          the additive source padding bias with the same beam axis of 1. With
          `layout="xla"` the heads are merged (shapes in `Decoder.initial_cache`).
        """
        self._build_decoder()
        self_cache, layers = self.decoder.initial_cache(context, cache_length, layout=layout)
        bias = mask_to_bias(padding_mask, self.compute_dtype)[:, tf.newaxis]
        return self_cache, {"layers": layers, "bias": bias}

    def step_constants(self, cache_length, rows, *, layout="graph"):
        """What every `decode_step` reads and nothing changes, prepared once per decoding call.

        Args:
          cache_length: as in `initial_cache`.
          rows: decoded sequences (`batch * beam_size`).
          layout: "graph": per-head caches and batched matmuls (`MultiHeadAttention`'s steps),
            the fastest in graph mode; "xla": heads merged in the caches and attention as
            products and sums (`layers.xla_step`), the fastest under XLA. The same math.

        Returns:
          A dict: `"weights"` (every kernel as a tensor in the compute dtype, the self-attention
          q/k/v kernels concatenated, the query scale folded in; a tied output projection's
          embedding matrix transposed with `layout="xla"`), `"self_bias"`
          `(cache_length, cache_length)` (row `t`: 0 up to position `t`, a large negative after:
          the look-ahead mask as a table, so no step rebuilds it) and `"slots"` int32
          `(cache_length, rows, heads, 3)` (row `t`: the scatter indices `[row, head, t]` that
          write position `t` into the self-attention cache; `(cache_length, rows, 2)`,
          `[row, t]`, with `layout="xla"`).
        """
        if layout not in STEP_LAYOUTS:
            raise ValueError(f"layout must be one of {sorted(STEP_LAYOUTS)}, got {layout!r}.")
        self._build_decoder()
        dtype = self.compute_dtype
        if layout == "xla":  # one slice per row: the heads are merged
            grids, shape = [tf.range(rows)], [cache_length, rows]
        else:
            grids = tf.meshgrid(tf.range(rows), tf.range(self.num_heads), indexing="ij")
            shape = [cache_length, rows, self.num_heads]
        positions = tf.reshape(tf.range(cache_length), [cache_length] + [1] * (len(shape) - 1))
        slots = tf.stack([tf.broadcast_to(g, shape) for g in [*grids, positions]], axis=-1)
        weights = {"decoder": self.decoder.step_weights(layout=layout)}
        if self.final_layer is not None:
            weights["final_kernel"] = read_weight(self.final_layer.kernel, dtype)
            weights["final_bias"] = read_weight(self.final_layer.bias, dtype)
        else:  # tied: the embedding matrix; under XLA transposed once here (see `decode_step`)
            embeddings = read_weight(self.decoder.embedding.embedding.embeddings, dtype)
            weights["final_kernel"] = tf.transpose(embeddings) if layout == "xla" else embeddings
        return {
            "weights": weights,
            "self_bias": mask_to_bias(create_look_ahead_mask(cache_length), dtype),
            "slots": slots,
        }

    def _build_decoder(self):
        # The decoder's weights must exist before they are read as tensors (`encode` on an
        # unbuilt model builds only the encoder).
        if self.share_embeddings and not self.encoder.built:
            self.encoder.build()  # the shared matrix is the encoder's (its checkpoint path)
        if not self.decoder.built:
            self.decoder.build()
        if self.final_layer is not None and not self.final_layer.built:
            self.final_layer.build((None, None, self.d_model))

    def decode_step(
        self, ids, step, self_cache, cross, constants, *, beam_size=1, layout="graph", history=None
    ):
        """One decoder position with the caches: the teacher-forced model's math for one token.

        Args:
          ids: int `(rows,)` the token at position `step` of the decoder input,
            `rows = batch * beam_size`, sentence-major (row `b * beam_size + i`).
          step: scalar int32 position, below `cache_length`.
          self_cache: `rows` rows (from `initial_cache`, tiled per beam, or a previous step).
          cross: the per-sentence part of `initial_cache` (`batch` rows, never tiled).
          constants: `step_constants(cache_length, rows, layout=layout)`.
          beam_size: rows per sentence.
          layout: the layout `initial_cache` and `step_constants` were built with.
          history: "xla" layout only: int32 `(rows, cache_length, 2)`, the `[cache row,
            position]` where each row's earlier positions were written (a beam search that
            moves no cache rows); None: in the row itself.

        Returns:
          `(logits, self_cache)`: float32 `(rows, target_vocab_size)` for position
          `step + 1`'s token, and the updated self-attention cache.
        """
        if history is not None and layout != "xla":
            raise ValueError(f"history needs the 'xla' step layout, got {layout!r}.")
        weights = constants["weights"]
        x, self_cache = self.decoder.step(
            ids,
            step,
            weights["decoder"],
            self_cache,
            cross["layers"],
            slot=tf.gather(constants["slots"], step),
            self_bias=tf.gather(constants["self_bias"], step),
            cross_bias=cross["bias"],
            beam_size=beam_size,
            layout=layout,
            history=history,
        )
        if self.final_layer is not None:
            logits = dense_step(x, weights["final_kernel"], weights["final_bias"])
        else:
            # XLA:CPU runs `transpose_b` at 4 rows (beam 4) 1.24x slower over the whole decode
            # than a kernel transposed beforehand; graph mode is as fast either way.
            logits = tf.matmul(x, weights["final_kernel"], transpose_b=layout != "xla")
        return tf.cast(logits, tf.float32), self_cache

    def get_config(self):
        config = super().get_config()
        config.update(dataclasses.asdict(self.config))
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Builds from a `ModelConfig` or from a `get_config()` dict."""
        if isinstance(config, ModelConfig):
            config = dataclasses.asdict(config)
        return cls(**config)
