import atexit
import functools
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import DecodeConfig, get_preset
from tf_transformer.data.sample import sample_pairs
from tf_transformer.inference.translator import Translator, validate_utf8
from tf_transformer.model import Transformer
from tf_transformer.text.tokenizers import END_ID, START_ID, UNK_ID, build_tokenizers

MAX_LENGTH = 10
SENTENCES = [
    "o carro vermelho é novo .",
    "ela comprou as maçãs ?",
    "nós comemos .",
    "os gatos pretos não são meus .",
]


@functools.cache
def tiny_tokenizers():
    """Tokenizers from 300 sample pairs, built once per test process (shared with the CLI tests)."""
    vocab_dir = tempfile.mkdtemp(prefix="tf_transformer_test_vocab_")
    atexit.register(shutil.rmtree, vocab_dir, ignore_errors=True)
    pairs = sample_pairs("train", size=300)
    ds = tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))
    return build_tokenizers(
        ds, vocab_size=200, vocab_dir=vocab_dir, learn_params={"num_iterations": 1}
    )


def tiny_model(tokenizers, seed=1):
    tf.keras.utils.set_random_seed(seed)
    config = get_preset("tiny").replace(
        num_layers=1,
        d_model=16,
        dff=32,
        max_length=32,
        input_vocab_size=int(tokenizers.source.get_vocab_size()),
        target_vocab_size=int(tokenizers.target.get_vocab_size()),
    )
    model = Transformer.from_config(config)
    model.build()
    return model


@functools.cache
def tiny_translator():
    """Built (and traced) once per test process; the CLI tests reuse it."""
    tokenizers = tiny_tokenizers()
    return Translator(
        tokenizers,
        tiny_model(tokenizers),
        config=DecodeConfig(max_source_tokens=MAX_LENGTH, max_new_tokens=MAX_LENGTH, beam_size=2),
    )


@pytest.fixture(scope="module")
def translator():
    return tiny_translator()


def texts(result):
    return [t.decode("utf-8") for t in result["text"].numpy()]


@pytest.mark.parametrize("beam_size", [1, 2])
def test_batched_translation_equals_one_by_one(translator, beam_size):
    batched = translator(SENTENCES, config=DecodeConfig(beam_size=beam_size))
    for i, sentence in enumerate(SENTENCES):
        single = translator([sentence], config=DecodeConfig(beam_size=beam_size))
        assert texts(single) == [texts(batched)[i]]
        length = int(single["lengths"][0])
        np.testing.assert_array_equal(
            single["ids"].numpy()[0, : length + 1], batched["ids"].numpy()[i, : length + 1]
        )
        np.testing.assert_allclose(single["scores"][0], batched["scores"][i], atol=1e-4)


def test_outputs_start_with_start_and_are_bounded(translator):
    result = translator(SENTENCES)
    ids = result["ids"].numpy()
    assert ids.dtype == np.int64
    assert (ids[:, 0] == START_ID).all()
    assert ids.shape[1] <= MAX_LENGTH + 1
    assert (result["lengths"].numpy() <= MAX_LENGTH).all()
    assert result["scores"].shape == (len(SENTENCES),)


@pytest.mark.parametrize("sentence", ["", "   ", "\t \n"])
def test_empty_and_whitespace_translate_to_nothing(translator, sentence):
    result = translator([sentence, "o carro ."])
    assert texts(result)[0] == ""
    np.testing.assert_array_equal(result["ids"].numpy()[0, :2], [START_ID, END_ID])


def test_long_sentence_is_truncated(translator):
    sentence = ("o carro vermelho é novo . " * 400)[:10_000]
    src = translator.source_ids(tf.constant([sentence]))
    assert src.shape == (1, MAX_LENGTH)
    assert src.numpy()[0, 0] == START_ID and src.numpy()[0, -1] == END_ID
    result = translator(sentence)
    assert result["ids"].shape[1] <= MAX_LENGTH + 1


def test_emoji_and_cjk_become_unk_and_translate(translator):
    src = translator.source_ids(tf.constant(["😀 猫", "o 😀 carro"])).numpy()
    assert UNK_ID in src[0] and UNK_ID in src[1]
    result = translator(["😀 猫", "o 😀 carro"])
    assert result["text"].shape == (2,)
    assert (result["lengths"].numpy() >= 1).all()


@pytest.mark.parametrize("bad", [b"o carro \xff\xfe", "o carro \udcff"])
def test_invalid_utf8_is_a_clear_value_error(translator, bad):
    with pytest.raises(ValueError, match="Sentence 1 is not valid UTF-8"):
        translator(["o carro .", bad])


def test_invalid_utf8_in_the_graph_fails_before_tokenizing(translator):
    with pytest.raises(tf.errors.InvalidArgumentError):
        translator.graph_fn()(tf.constant([b"\xff"]))


def test_validate_utf8_accepts_str_bytes_and_tensors():
    out = validate_utf8(tf.constant(["a", "ç"]))
    assert out.numpy().tolist() == [b"a", "ç".encode()]
    assert validate_utf8("ç").shape == (1,)
    assert validate_utf8([]).shape == (0,)


def test_graph_fn_has_a_fixed_signature(translator):
    fn = translator.graph_fn(config=DecodeConfig(beam_size=1))
    concrete = fn.get_concrete_function()
    assert concrete.structured_input_signature[0][0].shape.as_list() == [None]
    assert translator.graph_fn(config=DecodeConfig(beam_size=1)) is fn


def test_attention_for_the_first_sentence(translator):
    result = translator(SENTENCES[:2], config=DecodeConfig(beam_size=1), return_attention=True)
    attention = result["attention"].numpy()
    length = int(result["lengths"][0])
    src_len = int(tf.math.count_nonzero(translator.source_ids(tf.constant(SENTENCES[:1]))))
    assert attention.shape == (2, length, src_len)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert len(result["tgt_tokens"]) == length and len(result["src_tokens"]) == src_len
    assert result["src_tokens"][0] == "[START]"


def test_translate_batch_returns_python_strings(translator):
    out = translator.translate_batch(["", "o carro ."], config=DecodeConfig(beam_size=1))
    assert out[0] == "" and isinstance(out[1], str)
    assert translator.translate_batch([]) == []


def test_max_length_beyond_the_model_is_refused(translator):
    with pytest.raises(ValueError, match="max_length"):
        Translator(
            translator.tokenizers,
            translator.model,
            config=DecodeConfig(max_source_tokens=1000, max_new_tokens=1000),
        )


def test_decode_config_fields_left_unset_take_the_defaults_bounded_by_the_model():
    assert DecodeConfig().given() == {}
    assert DecodeConfig(beam_size=2).given() == {"beam_size": 2}
    assert DecodeConfig().resolved(64) == DecodeConfig(
        beam_size=DecodeConfig.DEFAULT_BEAM_SIZE,
        length_penalty=DecodeConfig.DEFAULT_LENGTH_PENALTY,
        max_source_tokens=64,
        max_new_tokens=64,
    )
