"""The encoder-decoder Transformer as a Keras model: ids in, logits out."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tf_transformer.config import ModelConfig
from tf_transformer.layers.decoder import Decoder
from tf_transformer.layers.encoder import Encoder
from tf_transformer.masks import create_look_ahead_mask, create_masks, create_padding_mask

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
)


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Transformer(tf.keras.Model):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    `model((src, tgt_in))` returns the logits and nothing else. Decoding strategies (greedy,
    beam search) live in `tf_transformer.inference` and drive the model through `encode`,
    `initial_cache` and `decode_step`; attention weights for plots come from
    `call_with_attention`. Masks are built inside from PAD = 0 (**1.0 = masked**) and passed
    explicitly to every layer.

    Keyword arguments are the fields of `ModelConfig` (same names, defaults and validation;
    the defaults are the paper's base model), plus those of `tf.keras.Model` (`name`, `dtype`).

    Args:
      num_layers, d_model, num_heads, dff, dropout_rate: paper sizes.
      input_vocab_size, target_vocab_size: vocabulary sizes (id 0 is PAD).
      max_length: positions of the sinusoid tables.
      norm_first: pre-norm instead of the paper's post-norm.
      positional_layout: "interleaved" (paper) or "concat" (tutorial).
      share_target_embeddings: the output projection reuses the target embedding matrix.

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
        self.final_layer = None
        if not config.share_target_embeddings:
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

    # The incremental-decoding seam used by tf_transformer.inference.decoding.

    def encode(self, src, training=False):
        """Runs the encoder once: returns `(context, padding_mask)`."""
        padding_mask = create_padding_mask(src)
        context, _ = self.encoder(src, padding_mask=padding_mask, training=training)
        return context, padding_mask

    def initial_cache(self, context, cache_length):
        """Fixed-size decoder cache; cross-attention keys/values are computed here, once."""
        return self.decoder.initial_cache(context, cache_length)

    def decode_step(self, ids, step, cache, padding_mask):
        """One decoder position with the cache.

        Args:
          ids: `(batch,)` the token at position `step` of the decoder input.
          step: scalar int32 position.
          cache: from `initial_cache` (or a previous step).
          padding_mask: `(batch, 1, 1, src_len)` from `encode`.

        Returns:
          `(logits, cache)`: float32 `(batch, target_vocab_size)` for position `step + 1`'s
          token, and the updated cache.
        """
        cache_length = tf.shape(cache[0]["self"]["key"])[2]
        # Slots after `step` are empty: mask them (1.0 = masked).
        future = create_look_ahead_mask(cache_length)[step]
        self_mask = future[tf.newaxis, tf.newaxis, tf.newaxis, :]  # (1, 1, 1, cache_len)
        x, _, cache = self.decoder(
            ids[:, tf.newaxis],
            None,
            self_mask=self_mask,
            cross_mask=padding_mask,
            training=False,
            cache=cache,
            cache_index=step,
        )
        return self.project(x[:, 0]), cache

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
