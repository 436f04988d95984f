import warnings

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import get_preset
from tf_transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from tf_transformer.model import Transformer

IDS = tf.constant(np.random.default_rng(0).integers(1, 50, size=(8, 25)), tf.int32)


def stack(stack_class, **changes):
    sizes = {"num_layers": 1, "d_model": 8, "num_heads": 2, "dff": 16, "vocab_size": 50}
    layer = stack_class(dropout_rate=0.0, **sizes, **changes)
    layer.build()
    return layer


@pytest.mark.parametrize("stack_class", [Encoder, Decoder])
def test_word_dropout_zeroes_whole_word_embeddings_and_keeps_positions(stack_class):
    layer = stack(stack_class, word_dropout=0.3)
    tf.keras.utils.set_random_seed(0)
    x = layer.embed(IDS, training=True).numpy()  # (8, 25, 8)
    positions = layer.embedding.positions(IDS).numpy()  # (1, 25, 8)
    words = layer.embedding.scaled_embedding(IDS).numpy()
    dropped = np.all(x == positions, axis=-1)  # (8, 25): rows of the positions alone
    kept = ~dropped
    # Survivors are scaled by 1 / (1 - p); the positions never are.
    np.testing.assert_allclose(x[kept], (words / 0.7 + positions)[kept], rtol=1e-5, atol=1e-6)
    # Whole rows: no surviving row equals the positions in any feature.
    assert not np.any((x == positions)[kept])
    assert 0.2 < dropped.mean() < 0.4  # 200 draws of p = 0.3


@pytest.mark.parametrize("stack_class", [Encoder, Decoder])
@pytest.mark.parametrize("word_dropout", [0.0, 0.5])
def test_word_dropout_is_training_only(stack_class, word_dropout):
    layer = stack(stack_class, word_dropout=word_dropout)
    reference = layer.embedding(IDS, offset=3).numpy()  # the embedding as before: no dropout
    np.testing.assert_array_equal(layer.embed(IDS, offset=3, training=False).numpy(), reference)
    if word_dropout == 0.0:
        np.testing.assert_array_equal(layer.embed(IDS, offset=3, training=True).numpy(), reference)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_word_dropout_under_mixed_precision(policy):
    layer = stack(Encoder, word_dropout=0.5, dtype=policy)
    tf.keras.utils.set_random_seed(1)
    x = layer.embed(IDS, training=True)
    assert x.dtype == tf.dtypes.as_dtype(policy.split("_")[1])
    x = tf.cast(x, tf.float32).numpy()
    positions = tf.cast(layer.embedding.positions(IDS), tf.float32).numpy()
    dropped = np.all(x == positions, axis=-1)
    assert np.isfinite(x).all() and 0.3 < dropped.mean() < 0.7


def test_stack_config_carries_the_dropouts_to_every_layer():
    layer = stack(Decoder, attention_dropout=0.1, activation_dropout=0.2, word_dropout=0.3)
    config = layer.get_config()
    assert (config["attention_dropout"], config["activation_dropout"]) == (0.1, 0.2)
    assert config["word_dropout"] == 0.3
    clone = Decoder.from_config(config)
    assert clone.get_config() == config
    block = clone.stack[0]
    assert block.self_attention.attention_dropout == block.cross_attention.attention_dropout == 0.1
    assert block.ffn.activation_dropout == 0.2
    assert clone.word_dropout_layer.rate == 0.3


def keras_warnings(action) -> list[str]:
    """The warnings that `action()` gives (each time, not once per place)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return [str(warning.message) for warning in caught]


def test_the_layers_build_their_sublayers_without_a_keras_warning():
    # Keras 3 warns "`build()` was called on layer ..., however the layer does not have a
    # `build()` method" when a layer with sublayers leaves them unbuilt: each of ours builds
    # them with their shapes, whether built explicitly (as `Stack.build` builds its layers) or
    # by a first call.
    x = tf.random.uniform((2, 5, 8))
    shape = (None, None, 8)
    sizes = {"d_model": 8, "num_heads": 2, "dff": 16}
    ids = IDS[:2, :6]
    model = Transformer.from_config(get_preset("tiny").replace(d_model=8, num_heads=2, dff=16))
    actions = {
        "encoder layer built": lambda: EncoderLayer(**sizes).build(shape),
        "decoder layer built": lambda: DecoderLayer(**sizes).build(shape),
        "encoder layer called": lambda: EncoderLayer(**sizes)(x),
        "decoder layer called": lambda: DecoderLayer(**sizes)(x, x),
        "stack called": lambda: Decoder(**sizes, num_layers=1, vocab_size=50)(ids, x),
        "model called": lambda: model((ids, ids)),
    }
    found = {name: keras_warnings(action) for name, action in actions.items()}
    assert found == {name: [] for name in actions}
    assert all(layer.built for layer in model._flatten_layers()) and model.count_params() > 0
    # A layer that left its sublayers to Keras (as the tutorial baseline's blocks do) warns.
    unbuilt = type("Unbuilt", (DecoderLayer,), {"build": tf.keras.layers.Layer.build})
    assert any("build()" in text for text in keras_warnings(lambda: unbuilt(**sizes).build(shape)))
