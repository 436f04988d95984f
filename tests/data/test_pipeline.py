"""Tests for tf_transformer.data.pipeline: shift, truncation, token budget, bucketing padding."""

import re
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.data import make_batches, padded_batches, padding_fraction
from tf_transformer.data.pipeline import bucket_batch_sizes, default_bucket_boundaries
from tf_transformer.text.language_tokenizer import LanguageTokenizer
from tf_transformer.text.tokenizers import END_ID, RESERVED_TOKENS, START_ID, write_vocab

pytestmark = pytest.mark.cost(20)  # seconds in make test (measured)


class _NumberTokenizer:
    """Test double: "5 6 7" → [START, 5, 6, 7, END], so lengths and ids are exact."""

    def tokenize(self, strings):
        words = tf.strings.split(strings)
        ids = tf.ragged.map_flat_values(tf.strings.to_number, words, out_type=tf.int64)
        batch = tf.shape(strings, out_type=tf.int64)[0]
        starts = tf.fill([batch, 1], tf.constant(START_ID, tf.int64))
        ends = tf.fill([batch, 1], tf.constant(END_ID, tf.int64))
        return tf.concat([starts, ids, ends], axis=1)


NUMBERS = types.SimpleNamespace(source=_NumberTokenizer(), target=_NumberTokenizer())


def _pairs(pairs):
    return tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))


def _random_pairs(count, max_words, seed=0):
    """Pairs of number sentences whose en length follows the pt length (±2), as in real text."""
    rng = np.random.default_rng(seed)

    def sentence(words):
        return " ".join(str(i) for i in rng.integers(4, 50, size=max(1, words)))

    lengths = rng.integers(1, max_words + 1, size=count)
    return [(sentence(n), sentence(n + rng.integers(-2, 3))) for n in lengths]


def test_tgt_in_and_tgt_out_are_shifted_and_padded():
    ds = padded_batches(_pairs([("4 5 6", "7 8"), ("9", "10 11 12 13")]), NUMBERS, shuffle=False)
    ((src, tgt_in), tgt_out), *rest = list(ds.as_numpy_iterator())
    assert rest == []
    np.testing.assert_array_equal(src, [[2, 4, 5, 6, 3], [2, 9, 3, 0, 0]])
    np.testing.assert_array_equal(tgt_in, [[2, 7, 8, 0, 0], [2, 10, 11, 12, 13]])
    np.testing.assert_array_equal(tgt_out, [[7, 8, 3, 0, 0], [10, 11, 12, 13, 3]])
    assert src.dtype == tgt_in.dtype == tgt_out.dtype == np.int64


def test_truncation_keeps_end_token():
    pairs = _pairs([("4 5 6 7 8", "4 5 6 7 8"), ("9", "9")])
    ds = padded_batches(pairs, NUMBERS, max_tokens=4, shuffle=False)
    (src, tgt_in), tgt_out = next(ds.as_numpy_iterator())
    np.testing.assert_array_equal(src, [[2, 4, 5, 3], [2, 9, 3, 0]])
    np.testing.assert_array_equal(tgt_in, [[2, 4, 5, 6], [2, 9, 0, 0]])
    np.testing.assert_array_equal(tgt_out, [[4, 5, 6, 3], [9, 3, 0, 0]])


def test_drop_long_removes_pairs_past_max_tokens():
    # With max_tokens=4: src may hold 4 tokens (2 words), en 5 tokens (3 words).
    pairs = _pairs([("4 5 6", "7"), ("4", "5 6 7 8"), ("4 5", "6 7 8"), ("9", "9")])
    ds = padded_batches(pairs, NUMBERS, max_tokens=4, drop_long=True, shuffle=False)
    (src, _), tgt_out = next(ds.as_numpy_iterator())
    np.testing.assert_array_equal(src, [[2, 4, 5, 3], [2, 9, 3, 0]])
    np.testing.assert_array_equal(tgt_out, [[6, 7, 8, 3], [9, 3, 0, 0]])


def test_bucket_batch_sizes_fit_the_budget():
    assert bucket_batch_sizes([8, 16, 64], 32, 256) == ([8, 16], [36, 17, 8])
    assert default_bucket_boundaries(40) == [8, 12, 16, 20, 24, 28, 33, 39]
    with pytest.raises(ValueError, match="cannot hold one example"):
        bucket_batch_sizes([8], 128, 100)
    with pytest.raises(ValueError, match="increasing"):
        bucket_batch_sizes([8, 8, 16], 32, 256)


def test_no_batch_exceeds_the_token_budget_and_nothing_is_lost():
    pairs = _random_pairs(400, max_words=40)
    ds = make_batches(_pairs(pairs), NUMBERS, max_tokens=32, token_budget=256, seed=1)
    examples = 0
    real_tokens = 0
    for (src, tgt_in), tgt_out in ds.as_numpy_iterator():
        assert src.shape[0] * src.shape[1] <= 256
        assert tgt_in.shape[0] * tgt_in.shape[1] <= 256
        assert tgt_out.shape == tgt_in.shape
        assert src.shape[1] <= 32 and tgt_out.shape[1] <= 32
        examples += src.shape[0]
        real_tokens += int(np.sum(src != 0))
    assert examples == 400
    assert real_tokens == sum(min(len(p.split()) + 2, 32) for p, _ in pairs)


def test_bucketing_pads_less_than_plain_batching():
    pairs = _pairs(_random_pairs(500, max_words=60, seed=2))
    bucketed = padding_fraction(
        make_batches(pairs, NUMBERS, max_tokens=64, token_budget=1024, seed=0)
    )
    plain = padding_fraction(padded_batches(pairs, NUMBERS, batch_size=32, max_tokens=64, seed=0))
    print(f"padding fraction: bucketed {bucketed:.3f}, plain padded {plain:.3f}")
    assert bucketed < plain / 2
    assert 0.0 < bucketed < 0.3


@pytest.fixture(scope="module")
def letter_tokenizers(tmp_path_factory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list(".?-")
    vocab = [*RESERVED_TOKENS, *letters, *(f"##{c}" for c in letters)]
    path = write_vocab(vocab, tmp_path_factory.mktemp("vocab") / "vocab.txt")
    letters = LanguageTokenizer(path)  # one tokenizer for both sides: half the tracing time
    return types.SimpleNamespace(source=letters, target=letters)


def test_real_tokenizers_feed_model_fit(letter_tokenizers):
    pairs = _pairs([("o gato .", "the cat ."), ("sim", "yes"), ("um cão ?", "a dog ?")] * 4)
    ds = make_batches(pairs, letter_tokenizers, max_tokens=16, token_budget=64, seed=0)
    (src, _), _ = next(iter(ds))
    texts = [s.decode() for s in letter_tokenizers.source.detokenize(src).numpy()]
    assert set(texts) <= {"o gato.", "sim", "um [UNK]?"}  # "ã" is not in the vocabulary

    vocab_size = int(letter_tokenizers.target.get_vocab_size())
    src_in = tf.keras.Input(shape=(None,), dtype="int64")
    tgt = tf.keras.Input(shape=(None,), dtype="int64")
    hidden = tf.keras.layers.Embedding(vocab_size, 4)(tgt)
    model = tf.keras.Model([src_in, tgt], tf.keras.layers.Dense(vocab_size)(hidden))
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(loss=loss)
    history = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def _package_function_names() -> set[str]:
    """The top-level names of the functions and classes the package's loaded modules define."""
    return {
        value.__qualname__.split(".")[0]
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "tf_transformer"
        for value in vars(module).values()
        if callable(value) and getattr(value, "__module__", "").startswith("tf_transformer")
    }


def test_building_tokenizers_and_batches_converts_no_package_function_with_autograph(capsys):
    # AutoGraph logs each function a traced map calls through it ("Converted call: <function
    # NAME at ...>"); the package's map, filter and reduce functions are graph code, left alone.
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.text.tokenizers import build_tokenizers

    pairs = _pairs(sample_pairs("train")[:100])
    tf.autograph.set_verbosity(1, alsologtostdout=True)
    try:
        tokenizers = build_tokenizers(pairs, vocab_size=300, learn_params={"num_iterations": 1})
        next(iter(make_batches(pairs, tokenizers, token_budget=256)))
    finally:
        tf.autograph.set_verbosity(0)
    called = re.findall(r"Converted call: <function ([\w.<>]+) at ", capsys.readouterr().out)
    assert called, "AutoGraph logged nothing: the check below would pass whatever happened"
    ours = {name for name in called if name.split(".")[0] in _package_function_names()}
    assert not ours, f"AutoGraph converted the package's {sorted(ours)}"
