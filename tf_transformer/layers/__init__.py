"""Keras layers of the Transformer; they know no data, text or decoding strategy."""

from tf_transformer.layers.attention import MultiHeadAttention, scaled_dot_product_attention
from tf_transformer.layers.decoder import Decoder, DecoderLayer
from tf_transformer.layers.encoder import Encoder, EncoderLayer
from tf_transformer.layers.feed_forward import FeedForward
from tf_transformer.layers.positional_encoding import PositionalEmbedding, positional_encoding

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "positional_encoding",
    "scaled_dot_product_attention",
]
