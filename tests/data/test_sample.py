"""Tests for the generated Portuguese→English sample corpus."""

import itertools

import pytest

from tf_transformer.data.sample import (
    SPLIT_SIZES,
    NounPhrase,
    Sentence,
    grammar,
    pairs,
    realize,
    sample_pairs,
)
from tf_transformer.data.sample import lexicon as sample_lexicon

_AUXILIARIES = {"do", "does", "did", "am", "is", "are", "was", "were"}


@pytest.fixture(scope="module")
def train():
    return sample_pairs("train")


def test_generation_is_deterministic():
    pairs._pool.cache_clear()
    first = sample_pairs("train", seed=3)
    pairs._pool.cache_clear()
    assert sample_pairs("train", seed=3) == first
    assert sample_pairs("train", seed=4) != first


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_split_sizes_and_prefix(split):
    pairs = sample_pairs(split)
    assert len(pairs) == SPLIT_SIZES[split]
    assert sample_pairs(split, size=7) == pairs[:7]


def test_dev_aliases():
    assert sample_pairs("validation") == sample_pairs("val") == sample_pairs("dev")


def test_splits_are_disjoint():
    sentences = [{pt for pt, _ in sample_pairs(split)} for split in SPLIT_SIZES]
    assert [len(s) for s in sentences] == list(SPLIT_SIZES.values())
    for a, b in itertools.combinations(sentences, 2):
        assert not a & b


@pytest.mark.parametrize("split", ["holdout", "Train", ""])
def test_bad_split_names_valid_ones(split):
    with pytest.raises(ValueError, match="'dev'.*'test'.*'train'"):
        sample_pairs(split)


@pytest.mark.parametrize("size", [-1, 1001])
def test_bad_size_raises(size):
    with pytest.raises(ValueError, match="size"):
        sample_pairs("test", size=size)


def test_translation_is_a_function():
    # The raw stream, repeats included: one Portuguese sentence never gets two translations.
    seen = {}
    for pt, en in itertools.islice(pairs._stream(seed=11), 30000):
        assert seen.setdefault(pt, en) == en, pt
    assert len(seen) < 30000  # Repeats happened, so the check compared something.


def test_sentence_lengths(train):
    lengths = [len(pt.split()) for pt, _ in train]
    assert min(lengths) >= 3 and max(lengths) <= 14
    assert max(len(en.split()) for _, en in train) <= 16
    assert all(pt == pt.lower() and en == en.lower() for pt, en in train)
    assert all(pt[-2:] in (" .", " ?") and pt[-1] == en[-1] for pt, en in train)


def test_vocabulary_has_300_portuguese_forms(train):
    forms = {word for pt, _ in train for word in pt.split()} - {".", "?"}
    assert len(forms) >= 300


def _count(pairs, predicate):
    return sum(1 for pt, en in pairs if predicate(pt.split(), en.split()))


@pytest.mark.parametrize("word", ["do", "da", "dos", "das", "no", "na", "nos", "nas"])
def test_contractions(train, word):
    assert _count(train, lambda pt, en: word in pt and ("de" in pt or "em" in pt)) == 0
    assert _count(train, lambda pt, en: word in pt) >= 50


@pytest.mark.parametrize(
    "words",
    [("o", "a", "os", "as"), ("um", "uma", "uns", "umas"), ("dois", "duas")]
    + [sample_lexicon.ADJECTIVES["vermelho"].forms, sample_lexicon.ADJECTIVES["pequeno"].forms],
)
def test_agreement_forms_all_used(train, words):
    for word in words:
        assert sum(word in pt.split() for pt, _ in train) >= 20, word


def test_adjective_moves_before_noun(train):
    lex = sample_lexicon
    english_order = {
        (noun_pt, adjective_pt): f"{adjective.en} {noun_en}"
        for noun in lex.NOUNS.values()
        for noun_pt, noun_en in ((noun.pt, noun.en), (noun.pt_plural, noun.en_plural))
        for adjective in lex.ADJECTIVES.values()
        for adjective_pt in adjective.forms
    }
    hits = 0
    for pt, en in train:
        words = pt.split()
        for bigram in itertools.pairwise(words):
            hits += bigram in english_order and f" {english_order[bigram]} " in en
    assert hits >= 2000


@pytest.mark.parametrize(
    "auxiliary, minimum", [("do", 300), ("does", 300), ("did", 600), ("is", 100), ("was", 100)]
)
def test_negation(train, auxiliary, minimum):
    assert (
        _count(train, lambda pt, en: "não" in pt and f" {auxiliary} not " in " ".join(en))
        >= minimum
    )
    assert _count(train, lambda pt, en: ("não" in pt) != ("not" in en)) == 0


@pytest.mark.parametrize("first", ["do", "does", "did", "is", "are", "was", "were"])
def test_questions_invert(train, first):
    assert _count(train, lambda pt, en: pt[-1] == "?" and en[0] == first) >= 50
    assert _count(train, lambda pt, en: pt[-1] == "?" and en[0] not in _AUXILIARIES) == 0


@pytest.mark.parametrize("pronoun", ["i", "we"])
def test_dropped_subject_pronoun(train, pronoun):
    dropped = _count(
        train, lambda pt, en: pt[0] not in sample_lexicon.PRONOUNS and pronoun in en[:2]
    )
    assert dropped >= 500


@pytest.mark.parametrize("past", ["ate", "saw", "bought", "drank", "wrote", "sold", "found"])
def test_irregular_pasts(train, past):
    assert _count(train, lambda pt, en: past in en) >= 20


@pytest.mark.parametrize("english", ["an", "'s", "'", "some", "men", "children"])
def test_english_morphology(train, english):
    assert _count(train, lambda pt, en: english in en) >= 20


_PHENOMENON_SENTENCES = {
    "agreement": Sentence("ser", NounPhrase("bicicleta"), "vermelho"),
    "reordering": Sentence(
        "comprar", "ele", NounPhrase("carro", plural=True, adjective="vermelho"), past=True
    ),
    "possessor": Sentence("ser", NounPhrase("carro", possessor="menino"), "novo"),
    "contraction": Sentence("estar", NounPhrase("criança", plural=True), place="escola"),
    "dropped_pronoun": Sentence("comer", "nós", NounPhrase("maçã", "dois", plural=True)),
    "negation": Sentence("ler", "ela", NounPhrase("jornal"), mood="negative"),
    "question": Sentence(
        "ver", "você", NounPhrase("gato", "um", adjective="preto"), past=True, mood="question"
    ),
    "be_question": Sentence("estar", NounPhrase("café"), "quente", past=True, mood="question"),
    "a_an": Sentence("querer", "eu", NounPhrase("laranja", "um"), mood="negative"),
}


def test_every_phenomenon_has_a_checked_example():
    assert set(_PHENOMENON_SENTENCES) == set(grammar.PHENOMENA)


@pytest.mark.parametrize("name", sorted(_PHENOMENON_SENTENCES))
def test_phenomena_examples(name):
    assert realize(_PHENOMENON_SENTENCES[name]) == grammar.PHENOMENA[name]


@pytest.mark.parametrize(
    "sentence, expected",
    [
        (
            Sentence(
                "ver", "eu", NounPhrase("carro", adjective="vermelho"), place="rua", past=True
            ),
            ("vi o carro vermelho na rua .", "i saw the red car on the street ."),
        ),
        (
            Sentence("ser", "eu", "feliz", past=True, mood="negative"),
            ("eu não era feliz .", "i was not happy ."),
        ),
        (
            Sentence(
                "voltar",
                NounPhrase("mulher", "este", plural=True),
                place="praia",
                place_plural=True,
            ),
            ("estas mulheres voltam das praias .", "these women return from the beaches ."),
        ),
        (
            Sentence(
                "ler",
                NounPhrase("menina"),
                NounPhrase("carta", possessor="homem", possessor_plural=True),
            ),
            ("a menina lê a carta dos homens .", "the girl reads the men 's letter ."),
        ),
        (
            Sentence("procurar", "elas", NounPhrase("guarda-chuva", "um"), mood="question"),
            ("elas procuram um guarda-chuva ?", "do they look for an umbrella ?"),
        ),
    ],
)
def test_realize_exact(sentence, expected):
    assert realize(sentence) == expected


def test_possessor_needs_definite_article():
    with pytest.raises(ValueError, match="possessor"):
        realize(Sentence("ser", NounPhrase("carro", "um", possessor="menino"), "novo"))


@pytest.mark.parametrize(
    "sentence",
    [Sentence("nadar", "eu"), Sentence("ser", "eu", "feliz", mood="exclamation")],
)
def test_unknown_verb_or_mood_raises(sentence):
    with pytest.raises(ValueError, match="unknown verb"):
        realize(sentence)
