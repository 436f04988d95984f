"""`text.plain.PlainTokenizer` gives the ids and the text of the TF tokenizers (the LiteRT
runtime's tokenizer contract), truecasing and lower-casing included."""

import random

import pytest
import tensorflow as tf

from tf_transformer.backends.export_files import first_words, vocabulary
from tf_transformer.text.plain import PlainTokenizer
from tf_transformer.text.special_tokens import RESERVED_TOKENS
from tf_transformer.text.tokenizers import Tokenizers, write_vocab

WORDS = [
    "o",
    "gato",
    "está",
    "na",
    "mesa",
    ".",
    ",",
    "?",
    "!",
    "(",
    ")",
    "“",
    "”",
    '"',
    "'",
    "-",
    "the",
    "The",
    "cat",
    "is",
    "on",
    "table",
    "##s",
    "##a",
    "don",
    "t",
    "it",
    "a",
    "3",
    "5",
    "ação",
    "e",
    "##́",
    "中",
    "文",
    "Tom",
    "I",
    "yes",
    "he",
    "said",
    "mother",
    "in",
    "law",
    "ó",
    "##lá",
    "$",
    ":",
    "%",
    "á",
    "##gil",
    "ß",
]
SENTENCES = [
    "O Gato está na mesa.",
    "o gato\u200bestá (na) mesa?!",
    "The cat is on the table, don't it?",
    "e\u0301 ação 中文 a\u00a0b \tTom",  # NFD é, CJK, a no-break space (not whitespace in RE2)
    "“yes,” he said 3.5 $5: 10%",
    "a" * 120,
    "",
    "  ",
    "mother-in-law Olá ágil ßa İstanbul",
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plain")
    vocab = write_vocab([*RESERVED_TOKENS, *WORDS], folder / "vocab.txt")
    return Tokenizers(vocab, vocab, lower_case_source=True, target_first_words=["The", "Olá"])


def plain(tokenizer):
    lower_case = bool(tokenizer.lower_case.numpy())
    return PlainTokenizer(
        vocabulary(tokenizer), lower_case=lower_case, first_words=first_words(tokenizer)
    )


@pytest.mark.parametrize("role", ["source", "target"])
def test_ids_equal_the_tf_tokenizers(tokenizers, role):
    tokenizer = getattr(tokenizers, role)
    expected = tokenizer.tokenize(tf.constant(SENTENCES)).to_list()
    assert [plain(tokenizer).tokenize(s) for s in SENTENCES] == expected


@pytest.mark.parametrize("role", ["source", "target"])
def test_text_equals_the_tf_tokenizers(tokenizers, role):
    tokenizer = getattr(tokenizers, role)
    rng = random.Random(0)
    size = len(RESERVED_TOKENS) + len(WORDS)
    rows = [[2, *(rng.randrange(size) for _ in range(10)), 3, 7] for _ in range(200)]
    rows += tokenizer.tokenize(tf.constant(SENTENCES)).to_list()
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(tf.ragged.constant(rows)).numpy()]
    assert [plain(tokenizer).detokenize(row) for row in rows] == expected


def test_truecasing_words_are_read_back(tokenizers):
    assert first_words(tokenizers.target) == ["Olá", "The"]
    assert first_words(tokenizers.source) is None
