import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import get_preset
from tf_transformer.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    PositionalEmbedding,
)
from tf_transformer.model import Transformer

pytestmark = pytest.mark.cost(50)  # seconds in make test (measured)

SRC = tf.constant([[5, 6, 7, 8], [9, 4, 0, 0]], tf.int64)
TGT = tf.constant([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0]], tf.int64)
SRC_LEN = [4, 2]
TGT_LEN = [5, 3]


def tiny_model(**changes):
    sizes = {"num_layers": 2, "input_vocab_size": 30, "target_vocab_size": 40}
    return Transformer.from_config(get_preset("tiny").replace(**{**sizes, **changes}))


def pad(ids, extra):
    return tf.concat([ids, tf.zeros((ids.shape[0], extra), ids.dtype)], axis=1)


def test_tutorial_preset_has_the_tutorial_parameter_count():
    config = get_preset("tutorial").replace(input_vocab_size=7765, target_vocab_size=7010)
    model = Transformer.from_config(config)
    model.build()
    assert model.count_params() == 4_646_882


def test_shared_target_embeddings_drop_the_output_matrix():
    untied, tied = tiny_model(), tiny_model(share_target_embeddings=True)
    untied.build()
    tied.build()
    assert untied.count_params() - tied.count_params() == 32 * 40 + 40
    assert tied((SRC, TGT)).shape == (2, 5, 40)


def test_shared_embeddings_are_one_matrix():
    untied = tiny_model(input_vocab_size=40)
    shared = tiny_model(input_vocab_size=40, share_embeddings=True)
    untied.build()
    shared.build()
    tables = [v for v in shared.trainable_variables if "embedding" in v.path]
    assert len(tables) == 1 and tables[0].shape == (40, 32)
    assert len(untied.trainable_variables) - len(shared.trainable_variables) == 3
    assert untied.count_params() - shared.count_params() == 2 * 40 * 32 + 40
    assert shared.decoder.embedding.embedding.embeddings is tables[0]
    assert shared.final_layer is None and shared((SRC, TGT)).shape == (2, 5, 40)


def test_shared_embeddings_need_one_vocabulary_size():
    with pytest.raises(ValueError, match=r"input_vocab_size \(30\) != target_vocab_size \(40\)"):
        tiny_model(share_embeddings=True)


def test_logits_shape_and_dtype():
    logits = tiny_model()((SRC, TGT), training=False)
    assert logits.shape == (2, 5, 40) and logits.dtype == tf.float32


@pytest.mark.parametrize("num_layers", [1, 2, 4])
@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_logits_at_real_positions(num_layers, norm_first):
    model = tiny_model(num_layers=num_layers, norm_first=norm_first)
    reference = model((SRC, TGT)).numpy()
    for src_extra, tgt_extra in [(3, 0), (0, 2), (5, 4)]:
        padded = model((pad(SRC, src_extra), pad(TGT, tgt_extra))).numpy()
        for row, length in enumerate(TGT_LEN):
            np.testing.assert_allclose(padded[row, :length], reference[row, :length], atol=1e-5)


def test_decoder_is_causal():
    model = tiny_model(num_layers=2)
    tgt = tf.constant([[2, 11, 12, 13, 14, 15]], tf.int64)
    src = SRC[:1]
    reference = model((src, tgt)).numpy()
    for t in range(5):
        changed = tgt.numpy().copy()
        changed[0, t + 1 :] = 17  # change every token after position t
        logits = model((src, tf.constant(changed))).numpy()
        np.testing.assert_allclose(logits[0, : t + 1], reference[0, : t + 1], atol=1e-5)
        assert not np.allclose(logits[0, t + 1 :], reference[0, t + 1 :], atol=1e-3)


def test_attention_weights_rows_sum_to_one_and_ignore_pad():
    model = tiny_model()
    _, attention = model.call_with_attention((SRC, TGT))
    assert set(attention) == {"encoder_self", "decoder_self", "cross"}
    for maps in attention.values():
        assert len(maps) == 2
        for weights in maps:
            np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)
    for weights in attention["encoder_self"] + attention["cross"]:
        assert weights.numpy()[1, :, :, SRC_LEN[1] :].max() < 1e-6  # source PAD
    for weights in attention["decoder_self"]:
        w = weights.numpy()
        assert w[:, :, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]].max() < 1e-6
        assert w[1, :, :, TGT_LEN[1] :].max() < 1e-6  # target PAD


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_forward_is_finite(policy):
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        model = tiny_model(norm_first=True)
        logits = model((pad(SRC, 3), pad(TGT, 2)), training=False)
        _, attention = model.call_with_attention((pad(SRC, 3), pad(TGT, 2)))
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)
    assert logits.dtype == tf.float32
    assert np.isfinite(logits.numpy()).all()
    assert attention["cross"][0].dtype == tf.dtypes.as_dtype(policy.split("_")[1])
    assert np.isfinite(tf.cast(attention["cross"][0], tf.float32).numpy()).all()


@pytest.mark.parametrize(
    "changes",
    [
        {"norm_first": True, "share_target_embeddings": True, "positional_layout": "concat"},
        {"share_embeddings": True, "input_vocab_size": 40},
    ],
    ids=["tied-concat", "shared"],
)
def test_keras_save_and_load_round_trip(tmp_path, changes):
    model = tiny_model(**changes)
    expected = model((SRC, TGT)).numpy()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = tf.keras.models.load_model(path, safe_mode=True)
    assert isinstance(loaded, Transformer)
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded((SRC, TGT)).numpy(), expected)


def test_get_config_from_config_round_trip():
    model = tiny_model()
    clone = Transformer.from_config(model.get_config())
    assert clone.config == model.config
    model.build()
    clone.build()
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone((SRC, TGT)).numpy(), model((SRC, TGT)).numpy())


@pytest.mark.parametrize(
    "layer",
    [
        PositionalEmbedding(vocab_size=10, d_model=8, max_length=20, positional_layout="concat"),
        MultiHeadAttention(d_model=8, num_heads=2),
        FeedForward(d_model=8, dff=16),
        EncoderLayer(d_model=8, num_heads=2, dff=16, dropout_rate=0.2, norm_first=True),
        DecoderLayer(d_model=8, num_heads=2, dff=16, dropout_rate=0.3),
        Encoder(num_layers=2, d_model=8, num_heads=2, dff=16, vocab_size=10, norm_first=True),
        Decoder(num_layers=1, d_model=8, num_heads=4, dff=16, vocab_size=12, max_length=33),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_every_layer_config_round_trips(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    registered = tf.keras.utils.get_registered_object(f"tf_transformer>{type(layer).__name__}")
    assert registered is type(layer)


@pytest.mark.parametrize(
    "changes",
    [
        {"num_layers": 2, "norm_first": True},
        {"num_layers": 2},
        {"num_layers": 1, "share_target_embeddings": True, "positional_layout": "concat"},
        {"num_layers": 2, "norm_first": True, "share_embeddings": True, "input_vocab_size": 40},
    ],
    ids=["pre-norm", "post-norm", "tied-concat", "shared"],
)
def test_incremental_decoding_matches_teacher_forcing(changes):
    model = tiny_model(**changes)
    reference = model((SRC, TGT)).numpy()
    context, padding_mask = model.encode(SRC)
    state = model.start_decoding(context, padding_mask, 8)
    for t in range(5):
        ids = tf.cast(TGT[:, t], tf.int32)
        logits, state = model.decode_step(ids, t, state)
        for row, length in enumerate(TGT_LEN):
            if t < length:
                np.testing.assert_allclose(logits.numpy()[row], reference[row, t], atol=1e-5)


def test_decode_step_on_several_rows_per_sentence_shares_its_cross_attention():
    # Three rows per sentence (as beam search tiles the cache): cross keys/values stay per
    # sentence; each row gets the logits its sentence gets alone.
    model = tiny_model(num_layers=2)
    context, padding_mask = model.encode(SRC)
    state = model.start_decoding(context, padding_mask, 4)
    tiled = tf.nest.map_structure(lambda t: tf.repeat(t, 3, axis=0), state.cache)
    tiled_state = dataclasses.replace(state, cache=tiled)
    assert state.cross[0][0].shape[0] == SRC.shape[0]
    for t in range(3):
        ids = tf.cast(TGT[:, t], tf.int32)
        single, state = model.decode_step(ids, t, state)
        rows, tiled_state = model.decode_step(tf.repeat(ids, 3), t, tiled_state)
        np.testing.assert_allclose(rows.numpy(), np.repeat(single.numpy(), 3, axis=0), atol=1e-5)


def test_explicit_mixed_policy_reaches_every_sublayer():
    # No global policy: the model's own dtype must reach every sublayer, dropout included.
    config = get_preset("tiny").replace(input_vocab_size=30, target_vocab_size=40, dropout_rate=0.1)
    model = Transformer.from_config({**config.to_dict(), "dtype": "mixed_float16"})
    logits = model((pad(SRC, 2), TGT), training=True)
    assert logits.dtype == tf.float32 and np.isfinite(logits.numpy()).all()
    assert model.encoder.enc_layers[0].dropout1.dtype_policy.name == "mixed_float16"


REGULARIZERS = {"attention_dropout": 0.1, "activation_dropout": 0.2, "word_dropout": 0.3}


@pytest.mark.parametrize("knob", sorted(REGULARIZERS))
def test_regularization_dropouts_change_training_outputs_only(knob):
    plain, regularized = tiny_model(), tiny_model(**{knob: 0.3})
    plain.build()
    regularized.build()
    regularized.set_weights(plain.get_weights())  # the rates add no weights
    reference = plain((SRC, TGT), training=False).numpy()
    # The tiny preset has dropout_rate 0: with the new rates at 0, training is inference.
    np.testing.assert_array_equal(plain((SRC, TGT), training=True).numpy(), reference)
    np.testing.assert_array_equal(regularized((SRC, TGT), training=False).numpy(), reference)
    tf.keras.utils.set_random_seed(0)
    trained = regularized((SRC, TGT), training=True).numpy()
    assert np.abs(trained - reference).max() > 1e-3


def test_regularization_dropouts_reach_every_layer_and_round_trip(tmp_path):
    model = tiny_model(**REGULARIZERS)
    config = model.get_config()
    assert {name: config[name] for name in REGULARIZERS} == REGULARIZERS
    clone = Transformer.from_config(config)
    assert clone.config == model.config
    for stack in (clone.encoder, clone.decoder):
        assert stack.word_dropout_layer.rate == 0.3
        for layer in stack.stack:
            assert layer.self_attention.attention_dropout_layer.rate == 0.1
            assert layer.ffn.activation_dropout_layer.rate == 0.2
    assert clone.decoder.stack[0].cross_attention.attention_dropout_layer.rate == 0.1
    for layer in (
        MultiHeadAttention(d_model=8, num_heads=2, attention_dropout=0.1),
        FeedForward(d_model=8, dff=16, activation_dropout=0.2),
        EncoderLayer(d_model=8, num_heads=2, dff=16, attention_dropout=0.1, activation_dropout=0.2),
        Encoder(num_layers=1, d_model=8, num_heads=2, dff=16, vocab_size=10, word_dropout=0.3),
    ):
        assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()
    # A model config written before the rates existed builds the model without them.
    old = {k: v for k, v in tiny_model().get_config().items() if k not in REGULARIZERS}
    assert Transformer.from_config(old).config == tiny_model().config
    # The .keras file keeps them, and inference is the same.
    expected = model((SRC, TGT)).numpy()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = tf.keras.models.load_model(path, safe_mode=True)
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded((SRC, TGT)).numpy(), expected)


def test_incremental_decoding_ignores_the_regularization_dropouts():
    model = tiny_model(num_layers=2, **REGULARIZERS)
    reference = model((SRC, TGT), training=False).numpy()
    context, padding_mask = model.encode(SRC)
    state = model.start_decoding(context, padding_mask, 8)
    for t in range(5):
        logits, state = model.decode_step(tf.cast(TGT[:, t], tf.int32), t, state)
        for row, length in enumerate(TGT_LEN):
            if t < length:
                np.testing.assert_allclose(logits.numpy()[row], reference[row, t], atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_regularization_dropouts_train_under_mixed_precision(policy):
    config = get_preset("tiny").replace(input_vocab_size=30, target_vocab_size=40, **REGULARIZERS)
    model = Transformer.from_config({**config.to_dict(), "dtype": policy})
    tf.keras.utils.set_random_seed(0)
    with tf.GradientTape() as tape:
        logits = model((pad(SRC, 2), TGT), training=True)
        loss = tf.reduce_mean(tf.square(logits))
    gradients = tape.gradient(loss, model.trainable_variables)
    assert logits.dtype == tf.float32 and np.isfinite(logits.numpy()).all()
    finite = [np.isfinite(tf.cast(tf.convert_to_tensor(g), tf.float32).numpy()) for g in gradients]
    assert all(f.all() for f in finite)
