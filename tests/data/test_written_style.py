"""Tests for the written style of the sample corpus (`make demo` trains on it)."""

import re

import pytest
import tensorflow as tf

from tf_transformer.data.sample import SPLIT_SIZES, sample_pairs
from tf_transformer.data.sample.written_style import written, written_pair
from tf_transformer.inference.evaluate import ted_style
from tf_transformer.text.detokenize import attach_punctuation


@pytest.fixture(scope="module")
def corpus():
    """{split: (lower-case pairs, written pairs)}."""
    return {
        split: (sample_pairs(split), sample_pairs(split, style="written")) for split in SPLIT_SIZES
    }


@pytest.mark.parametrize(
    "sentence, english, expected",
    [
        ("o carro é novo .", False, "O carro é novo."),
        ("the car is new .", True, "The car is new."),
        ("água fria ?", False, "Água fria?"),
        ("ônibus", False, "Ônibus."),  # a missing final mark becomes a period
        ("i saw the boy 's car .", True, "I saw the boy's car."),
        ("did i see the boys ' cats ?", True, "Did I see the boys' cats?"),
        ("vi o lápis .", False, "Vi o lápis."),  # "i" inside a word, and Portuguese: untouched
        ("comi o bolo .", True, "Comi o bolo."),
    ],
)
def test_written_exact(sentence, english, expected):
    assert written(sentence, english=english) == expected


@pytest.mark.parametrize("split", sorted(SPLIT_SIZES))
def test_written_corpus_is_cased_and_aligned(corpus, split):
    lower, cased = corpus[split]
    assert len(cased) == len(lower) == SPLIT_SIZES[split]
    for (pt_lower, en_lower), (pt, en) in zip(lower, cased):
        for text in (pt, en):
            assert text[0].isupper(), text
            assert text[-1] in ".?" and text[-2] not in " .?", text
            assert "  " not in text and text == text.strip()
        # Aligned: the same pair, in the other style (ted_style lower-cases and re-tokenizes).
        assert (ted_style(pt), ted_style(en)) == (pt_lower, en_lower)
        assert pt[-1] == en[-1]  # a question on both sides, or a statement on both
        assert re.search(r"(^| )I( |$)", en) or " i " not in f" {en_lower} "


def test_lower_case_corpus_unchanged(corpus):
    lower, _ = corpus["test"]
    assert sample_pairs("test", style="lower") == lower
    assert all(pt == pt.lower() and en == en.lower() for pt, en in lower)
    assert sample_pairs("test", size=5, style="written") == [written_pair(*p) for p in lower[:5]]


def test_unknown_style_raises():
    with pytest.raises(ValueError, match="'lower', 'written'"):
        sample_pairs("dev", style="title")


@pytest.mark.parametrize("split", ["dev", "test"])
def test_detokenizer_writes_the_written_style(corpus, split):
    # The target tokenizer splits every punctuation mark off ("boy ' s car ."); the detokenizer
    # must put back exactly the written reference, or the demo could not reach BLEU 100.
    _, cased = corpus[split]
    english = [en for _, en in cased]
    spaced = [" ".join(re.sub(r"([.?'])", r" \1 ", en).split()) for en in english]
    assert any("' s" in text for text in spaced) and any("s '" in text for text in spaced)
    joined = attach_punctuation(tf.constant(spaced)).numpy()
    assert [text.decode("utf-8") for text in joined] == english
