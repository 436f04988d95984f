"""The sample corpus's grammar: a sentence's structure (`Sentence`) realized in Portuguese and
English (`realize`). `pairs.py` draws the sentences, seeded.

Text is lower case with punctuation as separate tokens (like TED hrlr), 3 to 14 words a sentence;
`sample_pairs(style="written")` (the data spec `sample_written`) gives the same pairs capitalised
and punctuated as people write them (`written_style.py`): "O carro do menino é novo.".
Each sentence is one clause in one of three moods (statement, negation with `não`, yes/no question
ending in `?`), present or past tense, built from one of four patterns:

    transitive   [subject] [não] verb object [em + place]   comi o bolo no parque .
    adjective    [subject] [não] ser|estar adjective        a casa não é vermelha .
    place        [subject] [não] estar em place             você está na escola ?
    return       [subject] [não] voltar de place            os meninos voltaram da praia .

Noun phrases are a determiner (o, um, meu, seu, nosso, este, dois..cinco) + noun + an optional
adjective, or `o` + noun + adjective + `de` + a definite possessor. The English side carries the
phenomena a translation model has to learn:

- gender/number agreement: o/a/os/as, um/uma, vermelho/vermelha/vermelhos/vermelhas, dois/duas;
- reordering: adjective after the noun in Portuguese, before it in English (`the red car`), and
  the possessor first in English (`o carro do menino` → `the boy 's car`);
- contractions: de + o/a/os/as = do/da/dos/das, em + o/a/os/as = no/na/nos/nas;
- dropped subject pronouns: eu and nós are left out wherever the verb form alone says the person
  (`comi` → `i ate`, `comemos` → `we ate`); `era`/`estava`/`quis` keep `eu`, since they are also
  3rd person; ele/ela/você/eles/elas are always explicit;
- do-support: `não` → do/does/did not, questions → do/does/did + subject + base verb; with `be`,
  no auxiliary (`is not`, `is the car red ?`); regular and irregular pasts (ate, saw, bought);
- a/an before vowels, irregular plurals (men, children, fish), `uns/umas` → `some`.

The translation is a function of the Portuguese sentence: `seu` is always `your`, and the nós
forms that are the same in both tenses (`comemos`) are always read as past.
"""

from __future__ import annotations

import dataclasses

from tf_transformer.data.sample import lexicon as lex
from tf_transformer.errors import InvalidValueError

MOODS = ("statement", "negative", "question")

# One example per phenomenon; `tests/data/test_sample.py` rebuilds each from its structure.
PHENOMENA: dict[str, tuple[str, str]] = {
    "agreement": ("a bicicleta é vermelha .", "the bicycle is red ."),
    "reordering": ("ele comprou os carros vermelhos .", "he bought the red cars ."),
    "possessor": ("o carro do menino é novo .", "the boy 's car is new ."),
    "contraction": ("as crianças estão na escola .", "the children are at the school ."),
    "dropped_pronoun": ("comemos duas maçãs .", "we ate two apples ."),
    "negation": ("ela não lê o jornal .", "she does not read the newspaper ."),
    "question": ("você viu um gato preto ?", "did you see a black cat ?"),
    "be_question": ("o café estava quente ?", "was the coffee hot ?"),
    "a_an": ("não quero uma laranja .", "i do not want an orange ."),
}


@dataclasses.dataclass(frozen=True)
class NounPhrase:
    """A noun phrase, by lexicon keys: determiner + noun + adjective [+ de + possessor]."""

    noun: str
    determiner: str = "o"
    plural: bool = False
    adjective: str | None = None
    possessor: str | None = None  # A person noun; needs the determiner "o".
    possessor_plural: bool = False


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One clause, by lexicon keys.

    `verb` is a `TRANSITIVE_VERBS` key with a `NounPhrase` complement, "ser"/"estar" with an
    adjective complement, or "estar"/"voltar" with a place and no complement. `subject` is a
    `NounPhrase` or a `PRONOUNS` key. A transitive clause may also take a place (`em`).
    """

    verb: str
    subject: NounPhrase | str
    complement: NounPhrase | str | None = None
    place: str | None = None
    place_plural: bool = False
    past: bool = False
    mood: str = "statement"


def _slot(plural: bool, gender: str) -> int:
    """Index into (m sg, f sg, m pl, f pl) form tables."""
    return 2 * plural + (gender == "f")


def _noun_phrase(phrase: NounPhrase) -> tuple[list[str], list[str], str]:
    """Realises a noun phrase: (pt tokens, en tokens, gender)."""
    noun = lex.NOUNS[phrase.noun]
    slot = _slot(phrase.plural, noun.gender)
    pt = [
        lex.DETERMINERS[phrase.determiner].forms[slot],
        noun.pt_plural if phrase.plural else noun.pt,
    ]
    en = [noun.en_plural if phrase.plural else noun.en]
    if phrase.adjective is not None:
        pt.append(lex.ADJECTIVES[phrase.adjective].forms[slot])
        en.insert(0, lex.ADJECTIVES[phrase.adjective].en)
    if phrase.possessor is not None:
        if phrase.determiner != "o":
            raise InvalidValueError(
                f"a possessor needs the determiner 'o', got {phrase.determiner!r}"
            )
        owner = lex.NOUNS[phrase.possessor]
        article = lex.DETERMINERS["o"].forms[_slot(phrase.possessor_plural, owner.gender)]
        pt += [
            lex.CONTRACTIONS["de", article],
            owner.pt_plural if phrase.possessor_plural else owner.pt,
        ]
        owner_en = owner.en_plural if phrase.possessor_plural else owner.en
        # English genitive: the boys ' car, but the men 's car.
        return pt, ["the", owner_en, "'" if owner_en.endswith("s") else "'s"] + en, noun.gender
    determiner = lex.DETERMINERS[phrase.determiner]
    article = determiner.en_plural if phrase.plural else determiner.en
    if article == "a" and en[0][0] in "aeiou":
        article = "an"
    return pt, [article] + en, noun.gender


def _place_phrase(preposition: str, place_key: str, plural: bool) -> tuple[list[str], list[str]]:
    """`em`/`de` + definite article + place, contracted: (pt tokens, en tokens without the prep)."""
    place = lex.PLACES[place_key]
    article = lex.DETERMINERS["o"].forms[_slot(plural, place.gender)]
    pt = [lex.CONTRACTIONS[preposition, article], place.pt_plural if plural else place.pt]
    return pt, ["the", place.en_plural if plural else place.en]


def realize(sentence: Sentence) -> tuple[str, str]:
    """Realises a structured sentence as a (pt, en) pair of space-separated tokens.

    Args:
        sentence: the clause to realise.

    Returns:
        The Portuguese sentence and its English translation.
    """
    # Subject: tokens, verb slot (eu, ele, nós, eles), English person and gender for agreement.
    if isinstance(sentence.subject, NounPhrase):
        subject_pt, subject_en, gender = _noun_phrase(sentence.subject)
        slot, person = (3, "3p") if sentence.subject.plural else (1, "3s")
    else:
        subject_en_word, slot, person = lex.PRONOUNS[sentence.subject]
        subject_pt, subject_en = [sentence.subject], [subject_en_word]
        gender = "f" if sentence.subject in ("ela", "elas") else "m"
    if sentence.verb not in lex.VERBS or sentence.mood not in MOODS:
        raise InvalidValueError(f"unknown verb {sentence.verb!r} or mood {sentence.mood!r}")
    verb = lex.VERBS[sentence.verb]
    past = sentence.past or verb.present[slot] == verb.past[slot]
    forms = verb.past if past else verb.present
    if person in ("1s", "1p") and forms.count(forms[slot]) == 1:
        subject_pt = []  # The verb form alone says who: drop eu/nós.

    # Complement: object, predicate adjective or place.
    rest_pt: list[str] = []
    rest_en: list[str] = []
    if isinstance(sentence.complement, NounPhrase):
        rest_pt, rest_en, _ = _noun_phrase(sentence.complement)
    elif sentence.complement is not None:
        adjective = lex.ADJECTIVES[sentence.complement]
        rest_pt, rest_en = [adjective.forms[_slot(slot > 1, gender)]], [adjective.en]
    if sentence.place is not None:
        preposition = "de" if sentence.verb == "voltar" else "em"
        place_pt, place_en = _place_phrase(preposition, sentence.place, sentence.place_plural)
        rest_pt += place_pt
        english_preposition = (
            [] if sentence.verb == "voltar" else [lex.PLACES[sentence.place].preposition]
        )
        rest_en += english_preposition + place_en

    # Verb group: `be` inverts and negates itself; other verbs need do/does/did.
    negative, question = sentence.mood == "negative", sentence.mood == "question"
    if sentence.verb in lex.COPULAS:
        if past:
            be = "was" if person in ("1s", "3s") else "were"
        else:
            be = {"1s": "am", "3s": "is"}.get(person, "are")
        head, verb_en = [be], ["not"] if negative else []
    else:
        base, third, past_en = verb.en
        auxiliary = "did" if past else "does" if person == "3s" else "do"
        if negative or question:
            head, verb_en = [auxiliary], (["not"] if negative else []) + base.split()
        else:
            head, verb_en = [], (past_en if past else third if person == "3s" else base).split()
    if question:
        en = head + subject_en + verb_en + rest_en + ["?"]
    else:
        en = subject_en + head + verb_en + rest_en + ["."]
    pt = subject_pt + (["não"] if negative else []) + [forms[slot]] + rest_pt
    pt.append("?" if question else ".")
    return " ".join(pt), " ".join(en)
