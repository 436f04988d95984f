"""The encoder-decoder Transformer as a Keras model: ids in, logits out."""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from tf_transformer import masks
from tf_transformer.config import ModelConfig
from tf_transformer.layers.attention import AttentionCache, dense
from tf_transformer.layers.cache_layout import DecodingState, LayerCache
from tf_transformer.layers.decoder import Decoder
from tf_transformer.layers.encoder import Encoder
from tf_transformer.layers.kv_cache import GraphLayout

# The `ModelConfig` fields the encoder and decoder stacks take as they are.
STACK_FIELDS = ("num_layers", "d_model", "num_heads", "dff", "dropout_rate", "max_length")
STACK_FIELDS += ("norm_first", "positional_layout", "attention_dropout", "activation_dropout")
STACK_FIELDS += ("word_dropout", "activation")


@tf.keras.utils.register_keras_serializable(package="tf_transformer")
class Transformer(tf.keras.Model):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    `model((src, tgt_in))` returns the logits and nothing else. Searches (greedy, beam) live in
    `tf_transformer.inference` and drive `encode`, `start_decoding` and `decode_step`;
    `call_with_attention` adds the attention maps. Masks are built inside from PAD = 0
    (**1.0 = masked**) and passed explicitly to every layer.

    Args:
      **kwargs: the fields of `ModelConfig` (same names, defaults and validation: the paper's
        base model), plus those of `tf.keras.Model` (`name`, `dtype`).

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
        fields = {field.name for field in dataclasses.fields(ModelConfig)}
        config = ModelConfig(**{name: kwargs.pop(name) for name in fields & set(kwargs)})
        super().__init__(**kwargs)
        self.config = config
        stack = {name: getattr(config, name) for name in STACK_FIELDS}
        stack["dtype"] = self.dtype_policy
        self.encoder = Encoder(vocab_size=config.input_vocab_size, name="encoder", **stack)
        self.decoder = Decoder(vocab_size=config.target_vocab_size, name="decoder", **stack)
        if config.share_embeddings:
            self.decoder.share_embedding(self.encoder)
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
            self.final_layer.build((None, None, self.config.d_model))
        self.built = True

    def call(self, inputs, training=None):
        return self.call_with_attention(inputs, training=training)[0]

    def call_with_attention(self, inputs, training=False):
        """`(logits, attention)`: per-layer maps `"encoder_self"` `(batch, heads, src_len,
        src_len)`, `"decoder_self"` `(.., tgt_len, tgt_len)`, `"cross"` `(.., tgt_len, src_len)`."""
        x, attention = self.decoder_states(inputs, training=training)
        return self.project(x), attention

    def decoder_states(self, inputs, training=False):
        """`(x, attention)`: the decoder's output `(batch, tgt_len, d_model)` before `project`
        (the train step projects only real positions) and `call_with_attention`'s maps."""
        src, tgt_in = inputs
        padding_mask, combined_mask = masks.create_masks(src, tgt_in)
        context, encoder_weights = self.encoder(src, padding_mask=padding_mask, training=training)
        x, decoder_weights = self.decoder(
            tgt_in, context, self_mask=combined_mask, cross_mask=padding_mask, training=training
        )
        attention = {"decoder_self": decoder_weights["self"], "cross": decoder_weights["cross"]}
        return x, {"encoder_self": encoder_weights, **attention}

    def project(self, x, kernel=None):
        """Decoder output `(..., d_model)` -> float32 logits `(..., target_vocab_size)`; `kernel`:
        a tied projection's `(d_model, vocab)` matrix made beforehand (`start_decoding`)."""
        if self.final_layer is not None:
            logits = self.final_layer(x)
        elif kernel is not None:
            logits = tf.matmul(x, kernel)
        else:
            table = self.decoder.embedding.embedding.embeddings
            logits = tf.matmul(x, tf.cast(table, x.dtype), transpose_b=True)
        return tf.cast(logits, tf.float32)

    def encode(self, src, training=False):
        """Runs the encoder once: returns `(context, padding_mask)`."""
        self.build()  # every weight, so that `start_decoding` can read the decoder's
        padding_mask = masks.create_padding_mask(src)
        context, _ = self.encoder(src, padding_mask=padding_mask, training=training)
        return context, padding_mask

    def start_decoding(self, context, padding_mask, cache_length, layout=None) -> DecodingState:
        """What a decoding call prepares once: empty caches of `cache_length` positions for
        `encode`'s sentences, every layer's cross-attention keys and values (one matmul), and
        each weight read once. `layout`: a `CacheLayout`, by default `GraphLayout`."""
        layout = layout or GraphLayout(self.config.num_heads, self.config.d_model)
        batch, dtype, stack = tf.shape(context)[0], self.compute_dtype, self.decoder.stack
        kv = [layer.cross_attention.decoding_projection(layout, "key", "value") for layer in stack]
        kv = tuple(tf.concat(parts, axis=-1) for parts in zip(*kv))  # every layer's
        context = tf.reshape(context, (-1, self.config.d_model))
        memory = layout.memory(dense(context, kv), batch, 2 * len(stack))
        table = self.decoder.embedding.embedding.embeddings  # the encoder's when shared
        final = [] if self.final_layer is None else self.final_layer.weights
        variables = {id(v): v for v in self.decoder.weights + [table] + final}.values()
        return DecodingState(
            layout=layout,
            cache=[layout.empty(batch, cache_length, dtype)] * len(stack),
            cross=list(zip(memory[::2], memory[1::2])),
            cross_bias=masks.mask_to_bias(padding_mask, dtype)[:, tf.newaxis],
            projections=[
                (
                    layer.self_attention.decoding_projection(layout, "query", "key", "value"),
                    layer.cross_attention.decoding_projection(layout, "query"),
                )
                for layer in stack
            ],
            self_bias=masks.mask_to_bias(masks.create_look_ahead_mask(cache_length), dtype),
            variables=[(v, tf.convert_to_tensor(v)) for v in variables],
            output_kernel=layout.output_kernel(table, dtype) if self.final_layer is None else None,
        )

    def decode_step(self, ids, step, state: DecodingState):
        """One position: the decoder's own layers on the int `ids` `(rows,)` at `step` (a scalar
        below the cache length); a sentence's consecutive rows share its cross-attention. Returns
        `(logits, state)`: float32 `(rows, target_vocab_size)` for position `step + 1`, and
        `state` with `step` written into its cache."""
        layout, rows = state.layout, tf.size(ids)
        bias = tf.gather(state.self_bias, step)
        group = rows // tf.shape(state.cross_bias)[0]  # rows per sentence
        layers = zip(state.cache, state.cross, state.projections, strict=True)
        caches = [
            (
                AttentionCache(layout, own_projection, *own, bias, position=step),
                AttentionCache(layout, cross_projection, *memory, state.cross_bias, group=group),
            )
            for own, memory, (own_projection, cross_projection) in layers
        ]
        with keras.StatelessScope(state_mapping=state.variables):
            x, written = self.decoder.step(ids, step, caches)
            logits = self.project(x, kernel=state.output_kernel)
        cache = [LayerCache(own.key, own.value) for own in written]
        return logits, dataclasses.replace(state, cache=cache)

    def get_config(self):
        return {**super().get_config(), **dataclasses.asdict(self.config)}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Builds from a `ModelConfig` or from a `get_config()` dict."""
        if isinstance(config, ModelConfig):
            config = dataclasses.asdict(config)
        return cls(**config)
