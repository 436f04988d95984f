"""Sentence-initial case: "The car is new." is learnt as "the car is new.", and a translation's
first letter is capitalised again.

English capitalises the first word of every sentence, so a cased vocabulary holds "The" and
"the", "He" and "he", "What" and "what" as different tokens, and the model learns each twice.
A truecaser (as in Moses' ``truecase.perl``) writes a sentence's first word as it is mostly
written inside sentences: here a first word is lower-cased when its lower-case form (first
letter only: "The" → "the") occurs more often inside the training sentences than the
capitalised form, so "The" and "Do" are lowered and "I", "I'm", "Tom" and "Boston" keep their
capital. The words to lower are learnt once from the training targets (`learn_first_words`);
`lower_first_word` applies them in the graph, and `capitalize_first_letter` capitalises the
first letter of every translation, after any leading marks (`"yes," he said` → `"Yes," he
said`; `¿qué?` → `¿Qué?`) and never a sentence that starts with a digit. Only core TF string
ops (StaticRegexReplace, StringUpper, StringLower, StringJoin) and a static hash table, so a
SavedModel that uses them still runs in TF Serving.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable

import tensorflow as tf

from tf_transformer.text import rules

# The same words in Python: runs of letters (no digits, no underscore).
_WORDS = re.compile(r"[^\W\d_]+")


def _lower_first(word: str) -> str:
    return word[:1].lower() + word[1:]


def learn_first_words(sentences: Iterable[str]) -> list[str]:
    """The sentence-initial words to lower-case, learnt from target sentences.

    A word is listed when it starts a sentence capitalised and its form with a lower-case
    first letter occurs more often than the capitalised form inside the sentences (after
    their first word). A sentence's first word starts after any leading marks; a sentence
    that starts with a digit has none.

    Returns:
        The words, sorted ("Do", "The", ...).
    """
    first, inside = collections.Counter(), collections.Counter()
    for sentence in sentences:
        lead = re.match(r"[\W_]*", sentence).end()
        words = _WORDS.findall(sentence[lead:])
        if not words:
            continue
        starts_with_word = sentence[lead:].startswith(words[0])
        if starts_with_word:
            first[words[0]] += 1
        inside.update(words[1:] if starts_with_word else words)
    return sorted(
        word
        for word in first
        if _lower_first(word) != word and inside[_lower_first(word)] > inside[word]
    )


def _split_first_letter(strings: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(leading marks, the first letter or "" when a digit comes first, the rest)."""
    return (
        tf.strings.regex_replace(strings, rules.LEAD, r"\1"),
        tf.strings.regex_replace(strings, rules.FIRST_LETTER, r"\1"),
        tf.strings.regex_replace(strings, rules.AFTER_FIRST_LETTER, ""),
    )


def capitalize_first_letter(strings: tf.Tensor) -> tf.Tensor:
    """Upper-cases the first letter of each UTF-8 string, after any leading marks.

    Example:
        >>> capitalize_first_letter(tf.constant(['"yes," he said', "3 dogs", "ágil"]))
        <tf.Tensor: ... numpy=array([b'"Yes," he said', b'3 dogs', b'\\xc3\\x81gil'], ...)>
    """
    lead, letter, rest = _split_first_letter(strings)
    return tf.strings.join([lead, tf.strings.upper(letter, encoding="utf-8"), rest])


class FirstWordTruecaser(tf.Module):
    """Lower-cases the first word of a sentence when it is one of `words` (see the module).

    Args:
        words: the words to lower (`learn_first_words`); may be empty.
    """

    def __init__(self, words: Iterable[str], **kwargs):
        super().__init__(**kwargs)
        words = sorted(set(words))
        self.table = None
        if words:  # a static hash table cannot be empty
            self.table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(words), tf.ones([len(words)], tf.bool)
                ),
                default_value=False,
            )

    def lower_first_word(self, strings: tf.Tensor) -> tf.Tensor:
        """`tf.string` of any shape → the same, each first word lowered when it is listed."""
        if self.table is None:
            return strings
        listed = self.table.lookup(tf.strings.regex_replace(strings, rules.FIRST_WORD, r"\1"))
        lead, letter, rest = _split_first_letter(strings)
        lowered = tf.strings.join([lead, tf.strings.lower(letter, encoding="utf-8"), rest])
        return tf.where(listed, lowered, strings)
