"""Paragraphs and files: split into sentences, translated in batches, put back (exact strings)."""

from __future__ import annotations

import pytest

from tests.inference.test_translator import tiny_translator
from tf_transformer.text.document import split_document, translate_document

TEXT = (
    '  O Sr. Silva chegou às 10h. Ele disse: "Olá!"  Depois foi embora...\n'
    "\n"
    "\n"
    "A Dra. Ana ficou? Sim.\r\n"
    "Uma linha só\n"
    "   \n"
    "Fim."
)


def test_sentences_and_what_lies_between_them():
    layout = split_document(TEXT)
    assert layout.sentences == [
        "O Sr. Silva chegou às 10h.",  # "Sr." is a Portuguese abbreviation, not an end
        'Ele disse: "Olá!"',
        "Depois foi embora...",
        "A Dra. Ana ficou?",
        "Sim.",
        "Uma linha só",
        "Fim.",
    ]
    assert layout.gaps == ["  ", " ", "  ", "\n\n\n", " ", "\r\n", "\n   \n", ""]


def test_round_trip_is_exact():
    for text in (TEXT, "", "\n", "\n\n  \n", "Uma frase.", "Uma frase.\n", " a.  b. \t\n"):
        layout = split_document(text)
        assert layout.assemble(layout.sentences) == text


def test_translations_go_back_in_place_in_batches():
    calls = []

    def shout(sentences):  # a stand-in translation whose output shows where each went
        calls.append(len(sentences))
        return [f"<{s.upper()}>" for s in sentences]

    out = translate_document(TEXT, shout, batch_size=3)
    assert calls == [3, 3, 1]
    assert out == (
        '  <O SR. SILVA CHEGOU ÀS 10H.> <ELE DISSE: "OLÁ!">  <DEPOIS FOI EMBORA...>\n'
        "\n"
        "\n"
        "<A DRA. ANA FICOU?> <SIM.>\r\n"
        "<UMA LINHA SÓ>\n"
        "   \n"
        "<FIM.>"
    )


def test_a_real_translator_translates_documents_sentence_by_sentence():
    translator = tiny_translator()
    text = "O carro vermelho é novo. Nós comemos.\n\nEla comprou as maçãs?"
    layout = split_document(text)
    assert len(layout.sentences) == 3
    expected = layout.assemble(translator.translate_batch(layout.sentences))
    assert translate_document(text, translator.translate_batch, batch_size=2) == expected
    assert expected.count("\n") == 2 and "\n\n" in expected


def test_an_unknown_language_is_a_clear_error():
    with pytest.raises(ValueError, match="no sentence splitter for language 'xx'"):
        split_document("Uma frase.", language="xx")
