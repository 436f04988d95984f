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

_APOSTROPHE = "['’]"
_CLITIC = "(?i:s|t|re|ve|ll|d|m)"

# (pattern, rewrite, passes): RE2 patterns for tf.strings.regex_replace, applied in order.
RULES: tuple[tuple[str, str, int], ...] = (
    # TED-style quotes spelt with two marks ("` `", "' '") become one double quote.
    (r"(^| )` `( |$)", r'\1"\2', 1),
    (r"(^| )' '( |$)", r'\1"\2', 1),
    # 1. Clitics. "do n ' t" (the TED spelling "do n't", split) first, then "don ' t", "it ' s".
    (rf"(\pL) ([nN]) ({_APOSTROPHE}) ([tT])( |$)", r"\1\2\3\4\5", 1),
    (rf"(\pL) ({_APOSTROPHE}) ({_CLITIC})( |$)", r"\1\2\3\4", 1),
    # 2. Elisions: a single d, l or o glued to the word after the apostrophe.
    (rf"(^| )([dDlLoO]) ({_APOSTROPHE}) (\pL)", r"\1\2\3\4", 1),
    # 3. Quotes. Every mark left spaced is a word of its own, so the first one opens and the
    # next one closes (non-greedy). Direction-marked quotes lean on their own side.
    # Single quotes first, so a quote inside double quotes still has a space before it.
    (rf"(^| )({_APOSTROPHE}) (.*?) ({_APOSTROPHE})", r"\1\2\3\4", 1),
    (r'(^| )" (.*?) "', r'\1"\2"', 1),
    (r"([“«‘]) ", r"\1", 1),
    (r" ([”»])", r"\1", 1),
    # 4. An apostrophe left alone after an s: a plural possessive.
    (rf"([sS]) ({_APOSTROPHE})( |$)", r"\1\2\3", 1),
    # 5. Brackets.
    (r"([(\[{¿¡]) ", r"\1", 1),
    (r" ([)\]}])", r"\1", 1),
    # 6. Numbers: decimal points, times, thousands (exactly three digits), currency.
    (r"(\d) ([.:]) (\d)", r"\1\2\3", 2),
    (r"(\d) , (\d\d\d)\b", r"\1,\2", 2),
    (r"([$#]) (\d)", r"\1\2", 1),
    # 7. Hyphens and slashes between letters or digits.
    (r"([\pL\pN]) ([-/]) ([\pL\pN])", r"\1\2\3", 2),
    # 8. Marks written against the word before them.
    (r" ([.,;:!?%…])", r"\1", 1),
    # Abbreviations of single letters ("a. m." → "a.m.", "U. S." → "U.S.") and web domains.
    (r"((?:^| |\.)\pL\.) (\pL\.)", r"\1\2", 2),
    (r"(\pL)\. (com|org|net|edu|gov|br|pt)\b", r"\1.\2", 1),
)


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
    for pattern, rewrite, passes in RULES:
        for _ in range(passes):
            text = tf.strings.regex_replace(text, pattern, rewrite)
    return text
