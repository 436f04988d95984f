"""The sample corpus's pairs: sentences drawn at random (seeded) from the grammar, deduplicated,
cut into train/dev/test splits, in lower case or written style."""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator

from tf_transformer.data.sample import lexicon as lex
from tf_transformer.data.sample.grammar import NounPhrase, Sentence, realize
from tf_transformer.data.sample.written_style import written_pair
from tf_transformer.errors import InvalidValueError

SPLIT_SIZES = {"train": 20000, "dev": 1000, "test": 1000}
_SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
STYLES = ("lower", "written")  # `sample_pairs(style=...)`: the data specs sample, sample_written


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
        raise InvalidValueError(f"unknown style {style!r}; expected one of {STYLES}")
    if split not in _SPLIT_NAMES:
        raise InvalidValueError(f"unknown split {split!r}; expected one of {sorted(_SPLIT_NAMES)}")
    name = _SPLIT_NAMES[split]
    full = SPLIT_SIZES[name]
    if size is None:
        size = full
    if not 0 <= size <= full:
        raise InvalidValueError(f"size must be between 0 and {full} for split {name!r}, got {size}")
    start = {
        "train": 0,
        "dev": SPLIT_SIZES["train"],
        "test": SPLIT_SIZES["train"] + SPLIT_SIZES["dev"],
    }[name]
    pairs = _pool(seed)[start : start + size]
    if style == "written":
        return [written_pair(pt, en) for pt, en in pairs]
    return list(pairs)
