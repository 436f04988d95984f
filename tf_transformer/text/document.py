"""Documents in, documents out: split each line into sentences, translate, put them back.

The model translates sentences; a paragraph or a file is many. `split_document` cuts a text
into its sentences with the Moses-style splitter of the `sentence-splitter` package (it knows
each language's non-breaking abbreviations: "Sr.", "Dra.", "p. ex." in Portuguese) and keeps
everything else as it was: the line breaks (a line is never joined to the next), blank lines,
and the whitespace around and between sentences. `Layout.assemble` puts translations back in
the sentences' places, so only the sentences change.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

from tf_transformer.errors import InvalidValueError


@functools.cache
def _splitter(language: str):
    from sentence_splitter import SentenceSplitter, SentenceSplitterException

    code = language.split("-")[0].split("_")[0].lower()
    try:
        return SentenceSplitter(language=code)
    except SentenceSplitterException:
        raise InvalidValueError(
            f"no sentence splitter for language {language!r} (sentence-splitter knows ca, cs, "
            "da, de, el, en, es, fi, fr, hu, is, it, lt, lv, nl, no, pl, pt, ro, ru, sk, sl, "
            "sv, tr)"
        ) from None


def split_line(line: str, language: str = "pt") -> list[tuple[int, int]]:
    """The `(start, end)` spans of the sentences of one line, in order, as they stand in
    `line` (the splitter collapses runs of spaces; the spans point at the original text)."""
    spans, position = [], 0
    for sentence in _splitter(language).split(line):
        words = sentence.split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(word) for word in words)
        match = re.compile(pattern).search(line, position)
        if match is None:  # the splitter changed more than spaces: keep the rest whole
            rest = line[position:]
            start = position + len(rest) - len(rest.lstrip())
            spans.append((start, len(line.rstrip())))
            return spans
        spans.append(match.span())
        position = match.end()
    return spans


@dataclasses.dataclass(frozen=True)
class Layout:
    """A document cut into sentences and what lies between them.

    Attributes:
      sentences: the sentences to translate, in reading order.
      gaps: the text around them: `gaps[0]` before the first sentence, `gaps[i + 1]` after
        sentence i (whitespace, line breaks, blank lines); `len(gaps) == len(sentences) + 1`.
    """

    sentences: list[str]
    gaps: list[str]

    def assemble(self, translations: list[str]) -> str:
        """The document with each sentence replaced by its translation (in order)."""
        if len(translations) != len(self.sentences):
            raise InvalidValueError(
                f"{len(translations)} translations for {len(self.sentences)} sentences."
            )
        parts = [self.gaps[0]]
        for translation, gap in zip(translations, self.gaps[1:]):
            parts += [translation, gap]
        return "".join(parts)


def split_document(text: str, language: str = "pt") -> Layout:
    """Cuts `text` into sentences, line by line; `split_document(t).assemble(its sentences)`
    is `t` again, character for character.

    Raises:
      ValueError: no splitter for `language` (an ISO 639-1 code; "pt-BR" reads as "pt").
    """
    sentences, gaps, gap = [], [], []
    lines = text.split("\n")  # only "\n" ends a line ("\r\n" keeps its "\r" in the gap)
    for number, line in enumerate(lines):
        offset = 0
        for start, end in split_line(line, language):
            gaps.append("".join([*gap, line[offset:start]]))
            sentences.append(line[start:end])
            gap, offset = [], end
        gap.append(line[offset:] + ("\n" if number < len(lines) - 1 else ""))
    gaps.append("".join(gap))
    return Layout(sentences, gaps)


def translate_document(
    text: str,
    translate: Callable[[list[str]], list[str]],
    *,
    language: str = "pt",
    batch_size: int = 32,
) -> str:
    """Translates a document sentence by sentence, `batch_size` sentences per call of
    `translate`, and puts the translations back where the sentences were (see `Layout`)."""
    layout = split_document(text, language)
    translations: list[str] = []
    for start in range(0, len(layout.sentences), batch_size):
        translations += translate(layout.sentences[start : start + batch_size])
    return layout.assemble(translations)
