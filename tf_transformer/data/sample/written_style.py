"""The sample corpus as people write it: "o carro é novo ." → "O carro é novo.".

`sample.py` generates lower-case text with every punctuation mark a word of its own (like TED
hrlr). A model trained on it can only ever write lower case. `written` turns one of its sentences
into written style, which the `sample_written` data spec serves (`sample_pairs(style="written")`):

- the first letter is upper-case, on both sides (`água` → `Água`);
- English `i` is `I` wherever it stands; the lexicon has no other proper noun;
- the final `.` or `?` (every generated sentence has one; a missing one becomes `.`) and the
  English genitive lean on the word before them: `the boy 's car` → `the boy's car`,
  `the boys ' car` → `the boys' car`.

These are the marks the detokenizer re-attaches (`tf_transformer.text.detokenize`), so a model
trained on the written style prints exactly this text, and `ted_style` of it gives back the
lower-case sentence (`tests/data/test_written_style.py` checks both on the whole corpus).
"""

from __future__ import annotations

import re

_LEANING = re.compile(r" ([.,;:!?])")
_GENITIVE = re.compile(r" '(s?)(?= |$)")  # "boy 's" → "boy's", "boys '" → "boys'"
_ENGLISH_I = re.compile(r"(?<!\S)i(?!\S)")
FINAL_MARKS = ".?!"


def written(sentence: str, *, english: bool = False) -> str:
    """One lower-case, space-tokenized sample sentence in written style (see the module).

    Args:
      sentence: a sentence as `sample.realize` writes it.
      english: apply the English rules too (`I`, the genitive).

    Returns:
      The sentence capitalised, with its punctuation attached.

    Example:
      >>> written("i saw the boy 's car .", english=True)
      "I saw the boy's car."
    """
    if english:
        sentence = _ENGLISH_I.sub("I", sentence)
        sentence = _GENITIVE.sub(r"'\1", sentence)
    sentence = _LEANING.sub(r"\1", sentence.strip())
    if not sentence.endswith(tuple(FINAL_MARKS)):
        sentence += "."
    return sentence[:1].upper() + sentence[1:]


def written_pair(pt: str, en: str) -> tuple[str, str]:
    """A (pt, en) sample pair in written style."""
    return written(pt), written(en, english=True)
