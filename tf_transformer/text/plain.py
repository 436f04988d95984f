"""The tokenizers of an export in plain Python (`regex` and the standard library, no TensorFlow).

The LiteRT runtime (`backends.litert.runtime`) tokenizes with this; it gives the ids and the
text of `text.tokenizers.LanguageTokenizer` (tf-text's ``BertTokenizer`` with
``BERT_TOKENIZER_PARAMS``, our truecasing and punctuation rules). The contract, in order:

tokenize:
  1. truecasing (`first_words`): a sentence-initial word in the list gets a lower-case first
     letter (`rules.FIRST_WORD`);
  2. lower-casing, when the tokenizer lower-cases (``lower_case``; accents stay);
  3. Unicode NFC normalisation (the vocabularies were learnt from NFC text: an NFD "é" would
     become [UNK]);
  4. control and format characters (``\\p{Cc}``, ``\\p{Cf}``) become spaces;
  5. words: split at ASCII whitespace, and at every punctuation mark (ASCII ``!-/ :-@ [-` {-~``
     and ``\\p{P}``) and CJK ideograph, which are words of their own;
  6. WordPiece: each word as its longest vocabulary prefix, then ``##``-prefixed longest
     continuations; a word with no such split, or longer than 100 UTF-8 bytes, is [UNK];
  7. [START] first and [END] last.

detokenize: drop [PAD], [START], [END] and everything after the first [END]; join the pieces
with spaces and delete every " ##"; apply `rules.PUNCTUATION_RULES`; with `first_words`,
upper-case the first letter (`rules.LEAD`, `rules.FIRST_LETTER`).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Sequence

import regex

from tf_transformer.text import rules
from tf_transformer.text.special_tokens import END_ID, PAD_ID, START_ID, UNK_ID

# tf-text's BertTokenizer: the delimiters of its basic tokenizer; the kept ones are the words
# made of one punctuation mark or one CJK ideograph.
_KEPT = (
    r"[!-/]|[:-@]|[\[-`]|[{-~]|[\p{P}]"
    "|[\u4e00-\u9fff]|[\u3400-\u4dbf]|[\U00020000-\U0002a6df]|[\U0002a700-\U0002b73f]"
    "|[\U0002b740-\U0002b81f]|[\U0002b820-\U0002ceaf]|[\uf900-\ufaff]|[\U0002f800-\U0002fa1f]"
)
# RE2's \s, \d and \b are ASCII (Python's are Unicode; `regex.ASCII` would also narrow \pL).
_RE2_CLASSES = {
    r"\s": r"[\t\n\f\r ]",
    r"\d": "[0-9]",
    r"\b": r"(?:(?<=\w)(?!\w)|(?<!\w)(?=\w))".replace(r"\w", "[0-9A-Za-z_]"),
}
_DELIMITER = regex.compile(_RE2_CLASSES[r"\s"] + "+|" + _KEPT)
_KEPT_DELIMITER = regex.compile(_KEPT)
_CONTROL = regex.compile(r"\p{Cc}|\p{Cf}")
SUFFIX = "##"
MAX_BYTES_PER_WORD = 100


@functools.cache
def _compiled(pattern: str) -> regex.Pattern:
    """A rule compiled as RE2 reads it (`_RE2_CLASSES`)."""
    for re2, python in _RE2_CLASSES.items():
        pattern = pattern.replace(re2, python)
    return regex.compile(pattern)


class PlainTokenizer:
    """One language's WordPiece tokenizer (see the module docstring for the contract).

    Args:
        vocab: the tokens in id order, the reserved tokens first.
        lower_case: lower-case text before tokenizing.
        first_words: truecasing: the sentence-initial words to lower (None: no truecasing).
    """

    def __init__(
        self, vocab: Sequence[str], *, lower_case: bool, first_words: Iterable[str] | None
    ):
        self.vocab = list(vocab)
        self.ids = {token: index for index, token in enumerate(self.vocab)}
        self.lower_case = lower_case
        self.first_words = None if first_words is None else frozenset(first_words)

    def tokenize(self, text: str) -> list[int]:
        """A sentence -> ids, [START] … [END]."""
        if self.first_words:
            word = _compiled(rules.FIRST_WORD).sub(r"\1", text)
            if word in self.first_words:
                text = self._change_first_letter(text, str.lower)
        if self.lower_case:
            text = text.lower()  # full case mapping, as tf.strings.lower(encoding="utf-8")
        text = _CONTROL.sub(" ", unicodedata.normalize("NFC", text))
        ids = [START_ID]
        for word in self._words(text):
            ids.extend(self._wordpieces(word))
        return [*ids, END_ID]

    def detokenize(self, ids: Iterable[int]) -> str:
        """Ids (START, PAD and END anywhere) -> the text, as `LanguageTokenizer.detokenize`."""
        tokens = []
        for index in ids:
            index = int(index)
            if index == END_ID:
                break
            if index not in (PAD_ID, START_ID):
                tokens.append(self.vocab[index] if index < len(self.vocab) else "[UNK]")
        text = regex.sub("^ +| +$", "", " ".join(tokens).replace(" " + SUFFIX, ""))
        for pattern, rewrite, passes in rules.PUNCTUATION_RULES:
            for _ in range(passes):
                text = _compiled(pattern).sub(rewrite, text)
        return text if self.first_words is None else self._change_first_letter(text, str.upper)

    @staticmethod
    def _change_first_letter(text: str, change) -> str:
        lead = _compiled(rules.LEAD).sub(r"\1", text)
        letter = _compiled(rules.FIRST_LETTER).sub(r"\1", text)
        rest = _compiled(rules.AFTER_FIRST_LETTER).sub("", text)
        return lead + change(letter) + rest  # "ß" -> "SS", as tf.strings.upper

    @staticmethod
    def _words(text: str) -> list[str]:
        words, start = [], 0
        for match in _DELIMITER.finditer(text):
            words.append(text[start : match.start()])
            if _KEPT_DELIMITER.fullmatch(match.group()):
                words.append(match.group())
            start = match.end()
        words.append(text[start:])
        return [word for word in words if word]

    def _wordpieces(self, word: str) -> list[int]:
        if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
            return [UNK_ID]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else SUFFIX + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    start = end
                    break
            else:
                return [UNK_ID]
        return pieces
