"""The text rules of detokenization and truecasing, as data: written once, run by two engines.

The SavedModel runs them with RE2 (`tf.strings.regex_replace`, in `text.detokenize` and
`text.truecase`); the LiteRT runtime, which has no TensorFlow, with Python's `regex` package
(`text.plain`, which spells out RE2's ASCII `\\d`, `\\s` and `\\b`). This module imports nothing.
"""

_APOSTROPHE = "['’]"
_CLITIC = "(?i:s|t|re|ve|ll|d|m)"

# (pattern, rewrite, passes), applied in order (see `tf_transformer.text.detokenize`).
PUNCTUATION_RULES: tuple[tuple[str, str, int], ...] = (
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

# Truecasing (`tf_transformer.text.truecase`): the marks before the first letter or digit,
# the first letter, the rest.
LEAD = r"^([^\pL\pN]*)(?s:.*)$"
FIRST_LETTER = r"^[^\pL\pN]*(\pL)?(?s:.*)$"
AFTER_FIRST_LETTER = r"^[^\pL\pN]*\pL?"
FIRST_WORD = r"^[^\pL\pN]*(\pL+)(?s:.*)$"
