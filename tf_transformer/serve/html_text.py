"""`format: html`: translate the text of an HTML fragment and keep its markup.

lxml parses the fragment (as a browser would: unclosed tags close, entities decode); every
text node and tail that holds more than whitespace is translated, and the fragment is written
back with the same elements and attributes. Scripts, styles and markup nested deeper than
`MAX_DEPTH` are refused rather than guessed at.
"""

from __future__ import annotations

from tf_transformer.errors import InvalidValueError

MAX_DEPTH = 64  # elements inside elements
REFUSED = ("script", "style", "iframe", "object", "embed")


class HtmlFragment:
    """A parsed fragment and its text nodes, in document order.

    Raises:
      InvalidValueError: a refused element (`REFUSED`), markup deeper than `MAX_DEPTH`, or
        text lxml cannot parse.
    """

    def __init__(self, html: str):
        import lxml.etree
        import lxml.html

        try:
            self.root = lxml.html.fragment_fromstring(html, create_parent="div")
        except (lxml.etree.ParserError, ValueError) as error:
            raise InvalidValueError(f"format html: cannot parse the HTML ({error})") from None
        for element in self.root.iter():
            if not isinstance(element.tag, str):
                continue  # comments and processing instructions: kept as they are
            if element.tag in REFUSED:
                raise InvalidValueError(
                    f"format html: <{element.tag}> is not translated; send the text without it"
                )
            if sum(1 for _ in element.iterancestors()) > MAX_DEPTH:
                raise InvalidValueError(
                    f"format html: markup nested deeper than {MAX_DEPTH} elements"
                )
        self.slots = []  # (element, "text" or "tail") holding text to translate
        for element in self.root.iter():
            for attribute in ("text", "tail"):
                if element is self.root and attribute == "tail":
                    continue
                value = getattr(element, attribute)
                if value and value.strip():
                    self.slots.append((element, attribute))

    def texts(self) -> list[str]:
        """The text nodes to translate, in document order."""
        return [getattr(element, attribute) for element, attribute in self.slots]

    def render(self, translations: list[str]) -> str:
        """The fragment with each text node replaced by its translation (`texts`' order)."""
        import lxml.html

        for (element, attribute), text in zip(self.slots, translations, strict=True):
            setattr(element, attribute, text)
        inner = [self.root.text or ""]
        inner += [lxml.html.tostring(child, encoding="unicode") for child in self.root]
        return "".join(inner)
