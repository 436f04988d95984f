"""Wordpieces joined by spaces → text as people write it: "the car is new ." → "the car is new.".

The WordPiece tokenizers split every punctuation mark into a word of its own (BERT's basic
tokenizer), so joining the detokenized words with spaces gives "don ' t", "( yes )" and
"new .". `attach_punctuation` puts those marks back where normal English and Portuguese text
has them, with `tf.strings.regex_replace` alone (the core `StaticRegexReplace` op), so a
SavedModel that detokenizes in its graph still needs only TF and TF Text.

The rules, in the order they run (RE2 syntax: no look-around, so a rule that must see both
neighbours of a mark runs twice to catch chains such as "mother - in - law"):

1. Clitics: "do n ' t" and "don ' t" → "don't"; "it ' s", "we ' ll", "I ' m" → "it's", …
2. Elisions after d/l/o: "d ' água" → "d'água", "o ' clock" → "o'clock".
3. Quotes in pairs: `" hi "` → `"hi"`, `' yes '` → `'yes'`; "“ ” « » ‘" by their side.
4. Plural possessives: "the students ' books" → "the students' books".
5. Brackets: "( yes )" → "(yes)".
6. Numbers: "3 . 5" → "3.5", "10 : 30" → "10:30", "1 , 000" → "1,000", "$ 5" → "$5".
7. Hyphens and slashes inside words: "guarda - chuva" → "guarda-chuva", "and / or" → "and/or".
8. Marks that lean left: " ." " ," " ;" " :" " !" " ?" " %" " …" lose the space before them.

A dash between spaces (" - ", " — ") and anything not listed is left as it is.
"""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.text.rules import PUNCTUATION_RULES as RULES


def attach_punctuation(text: tf.Tensor) -> tf.Tensor:
    """Re-attaches punctuation and clitics in space-separated words (see the module docstring).

    Args:
        text: `tf.string` of any shape: words (punctuation marks included) joined by single
            spaces, as `LanguageTokenizer.detokenize` joins them.

    Returns:
        `tf.string` of the same shape.

    Example:
        >>> attach_punctuation(tf.constant(["he said , \" don ' t \" ."]))
        <tf.Tensor: ... numpy=array([b'he said, "don\'t".'], dtype=object)>
    """
    for pattern, rewrite, passes in RULES:  # also applied by `text.plain` (Python's `regex`)
        for _ in range(passes):
            text = tf.strings.regex_replace(text, pattern, rewrite)
    return text
