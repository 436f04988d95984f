"""A Portuguese→English parallel corpus generated from a small grammar, offline and seeded.

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
import functools
import random
from collections.abc import Iterator

from tf_transformer.data import sample_lexicon as lex
from tf_transformer.data.written_style import written_pair

SPLIT_SIZES = {"train": 20000, "dev": 1000, "test": 1000}
_SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
MOODS = ("statement", "negative", "question")
STYLES = ("lower", "written")  # `sample_pairs(style=...)`: the data specs sample, sample_written

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
            raise ValueError(f"a possessor needs the determiner 'o', got {phrase.determiner!r}")
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
        raise ValueError(f"unknown verb {sentence.verb!r} or mood {sentence.mood!r}")
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


def _keys_by_kind(table: dict, kinds_of) -> dict[str, list[str]]:
    """Lexicon keys that fit each noun kind, in table order (so draws are reproducible)."""
    return {
        kind: [key for key, item in table.items() if kind in kinds_of(item)]
        for kind in lex.ALL_KINDS
    }


_NOUNS_BY_KIND = _keys_by_kind(lex.NOUNS, lambda noun: (noun.kind,))
_ADJECTIVES_BY_KIND = _keys_by_kind(lex.ADJECTIVES, lambda adjective: adjective.kinds)
# Draw tables: repeats weight the draw (uniform `choice` over a tuple is fast and seed-stable).
_OTHER_DETERMINERS = ("meu", "seu", "nosso", "este")
_SINGULAR_DETERMINERS = ("o",) * 3 + ("um",) * 2 + _OTHER_DETERMINERS
_PLURAL_DETERMINERS = (
    ("o",) * 3 + ("um",) + _OTHER_DETERMINERS + ("dois", "três", "quatro", "cinco")
)
_MASS_DETERMINERS = ("o",) * 2 + _OTHER_DETERMINERS
_PATTERNS = ("transitive",) * 10 + ("adjective",) * 4 + ("place",) * 3 + ("return",) * 2
_MOODS = ("statement",) * 5 + ("negative",) * 3 + ("question",) * 2
_PRONOUN_KEYS, _PLACE_KEYS = tuple(lex.PRONOUNS), tuple(lex.PLACES)
_VERB_KEYS = tuple(lex.TRANSITIVE_VERBS)


def _draw_noun_phrase(rng: random.Random, kinds: tuple[str, ...], possessor: bool) -> NounPhrase:
    """A random noun phrase whose noun is of one of `kinds`; `possessor` allows `de` + owner."""
    kind = rng.choice(kinds)
    noun = lex.NOUNS[rng.choice(_NOUNS_BY_KIND[kind])]
    plural = not noun.mass and rng.random() < 0.4
    if noun.mass:
        determiner = rng.choice(_MASS_DETERMINERS)
    else:
        determiner = rng.choice(_PLURAL_DETERMINERS if plural else _SINGULAR_DETERMINERS)
    adjective = rng.choice(_ADJECTIVES_BY_KIND[kind]) if rng.random() < 0.45 else None
    owner = None
    if possessor and determiner == "o" and rng.random() < 0.3:
        owner = noun.pt
        while owner == noun.pt:
            owner = rng.choice(_NOUNS_BY_KIND[lex.PERSON])
    return NounPhrase(noun.pt, determiner, plural, adjective, owner, rng.random() < 0.4)


def _draw_subject(rng: random.Random, kinds: tuple[str, ...]) -> NounPhrase | str:
    """A pronoun (when people fit `kinds`) or a noun phrase."""
    if lex.PERSON in kinds and rng.random() < 0.45:
        return rng.choice(_PRONOUN_KEYS)
    return _draw_noun_phrase(rng, kinds, possessor=True)


def _has_possessor(phrase: NounPhrase | str | None) -> bool:
    return isinstance(phrase, NounPhrase) and phrase.possessor is not None


def _draw_sentence(rng: random.Random) -> Sentence:
    """A random sentence: pattern, mood and tense first, then its words."""
    pattern, mood = rng.choice(_PATTERNS), rng.choice(_MOODS)
    past = rng.random() < 0.5
    place = rng.choice(_PLACE_KEYS)
    place_plural = rng.random() < 0.2
    if pattern == "transitive":
        verb_key = rng.choice(_VERB_KEYS)
        verb = lex.TRANSITIVE_VERBS[verb_key]
        subject = _draw_subject(rng, lex.ANIMATE if verb.animal_subject else (lex.PERSON,))
        obj = _draw_noun_phrase(rng, verb.object_kinds, possessor=not _has_possessor(subject))
        with_place = rng.random() < 0.3 and not (_has_possessor(subject) or _has_possessor(obj))
        return Sentence(
            verb_key, subject, obj, place if with_place else None, place_plural, past, mood
        )
    if pattern == "adjective":
        subject = _draw_subject(rng, lex.ALL_KINDS)
        if isinstance(subject, NounPhrase):
            kind, used = lex.NOUNS[subject.noun].kind, subject.adjective
        else:
            kind, used = lex.PERSON, None
        adjective = used
        while adjective == used:
            adjective = rng.choice(_ADJECTIVES_BY_KIND[kind])
        return Sentence(
            lex.ADJECTIVES[adjective].copula, subject, adjective, None, False, past, mood
        )
    verb_key = "estar" if pattern == "place" else "voltar"
    subject = _draw_subject(rng, lex.ALL_KINDS if pattern == "place" else lex.ANIMATE)
    return Sentence(verb_key, subject, None, place, place_plural, past, mood)


def _stream(seed: int) -> Iterator[tuple[str, str]]:
    """An endless, seeded stream of (pt, en) pairs, repeats included."""
    rng = random.Random(seed)
    while True:
        yield realize(_draw_sentence(rng))


@functools.lru_cache(maxsize=4)
def _pool(seed: int) -> tuple[tuple[str, str], ...]:
    """The first `sum(SPLIT_SIZES)` distinct Portuguese sentences of the stream, in order."""
    pairs: dict[str, str] = {}
    total = sum(SPLIT_SIZES.values())
    for pt, en in _stream(seed):
        if pairs.setdefault(pt, en) != en:
            raise RuntimeError(f"ambiguous grammar: {pt!r} → {pairs[pt]!r} and {en!r}")
        if len(pairs) == total:
            return tuple(pairs.items())
    raise AssertionError("unreachable")


def sample_pairs(
    split: str, seed: int = 0, size: int | None = None, *, style: str = "lower"
) -> list[tuple[str, str]]:
    """(pt, en) pairs of one split of the generated corpus.

    The splits partition one pool of distinct Portuguese sentences, so no sentence is in two.
    The written style is the same pairs, capitalised and punctuated (`written_style`).

    Args:
        split: "train", "dev" or "test"; "validation" and "val" also name "dev".
        seed: seed of the generator; the same seed gives the same pairs.
        size: number of pairs, at most `SPLIT_SIZES[split]`; a prefix of the full split.
            None for the whole split.
        style: "lower" (lower case, punctuation spaced: "o carro é novo .") or "written"
            ("O carro é novo."); see `STYLES`.

    Returns:
        A list of (portuguese, english) sentence pairs.

    Raises:
        ValueError: for an unknown split name or style, or a size out of range.
    """
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; expected one of {STYLES}")
    if split not in _SPLIT_NAMES:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(_SPLIT_NAMES)}")
    name = _SPLIT_NAMES[split]
    full = SPLIT_SIZES[name]
    if size is None:
        size = full
    if not 0 <= size <= full:
        raise ValueError(f"size must be between 0 and {full} for split {name!r}, got {size}")
    start = {
        "train": 0,
        "dev": SPLIT_SIZES["train"],
        "test": SPLIT_SIZES["train"] + SPLIT_SIZES["dev"],
    }[name]
    pairs = _pool(seed)[start : start + size]
    if style == "written":
        return [written_pair(pt, en) for pt, en in pairs]
    return list(pairs)
