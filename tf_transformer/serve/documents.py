"""The texts of a request as sentences, and back: one backend call for all of them.

A LibreTranslate `q` is a text of any length (a paragraph, a page's HTML), and a list of them.
Each text is cut into sentences as `translate --file` cuts a file (`text.document`); the
sentences of every text go to the batcher together, and each text is put back together from
its sentences' translations. An alternative of a text is the text with each sentence's next
best translation (its best where it has no other).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tf_transformer.serve.html_text import HtmlFragment
from tf_transformer.text.document import split_document

Translate = Callable[[list[str], int], Awaitable[list[list[str]]]]


async def translate_texts(
    texts: list[str], *, html: bool, alternatives: int, language: str, translate: Translate
) -> tuple[list[str], list[list[str]]]:
    """Each text's translation, and its up to `alternatives` distinct other translations.

    Args:
      texts: the request's texts (`q`).
      html: the texts are HTML fragments (`html_text.HtmlFragment`): only text nodes change.
      alternatives: how many other translations to return per text (0: none).
      language: the source language (the sentence splitter's).
      translate: `(sentences, n) -> each sentence's n best distinct translations` (the
        batcher's `translate`).
    """
    fragments = [HtmlFragment(text) if html else None for text in texts]
    layouts = []
    for text, fragment in zip(texts, fragments):
        parts = fragment.texts() if fragment is not None else [text]
        layouts.append([split_document(part, language) for part in parts])
    sentences = [s for parts in layouts for layout in parts for s in layout.sentences]
    results = iter(await translate(sentences, alternatives + 1) if sentences else [])
    translations, others = [], []
    for fragment, parts in zip(fragments, layouts):
        options = [[next(results) for _ in layout.sentences] for layout in parts]
        versions = []
        for rank in range(alternatives + 1):
            rendered = [
                layout.assemble([beams[min(rank, len(beams) - 1)] for beams in choice])
                for layout, choice in zip(parts, options)
            ]
            versions.append(fragment.render(rendered) if fragment is not None else rendered[0])
        best, rest = versions[0], []
        for version in versions[1:]:
            if version != best and version not in rest:
                rest.append(version)
        translations.append(best)
        others.append(rest)
    return translations, others
