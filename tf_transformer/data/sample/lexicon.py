"""Vocabulary tables for the generated Portuguese→English sample corpus (see `sample.py`).

Every table is an ordered dict or tuple, so random draws over it are reproducible from a seed.
Portuguese verb forms are listed per tense in the order (eu, você/ele/ela, nós, eles/elas).
"""

from __future__ import annotations

from typing import NamedTuple

# Noun kinds; verbs and adjectives say which kinds they combine with.
PERSON, ANIMAL, FOOD, DRINK = "person", "animal", "food", "drink"
READABLE, OPENABLE, OBJECT, VEHICLE = "readable", "openable", "object", "vehicle"
ANIMATE = (PERSON, ANIMAL)
THING = (READABLE, OPENABLE, OBJECT, VEHICLE)
ALL_KINDS = ANIMATE + (FOOD, DRINK) + THING


class Noun(NamedTuple):
    """A noun: Portuguese singular/plural and gender ("m"/"f"), English singular/plural."""

    pt: str
    pt_plural: str
    gender: str
    en: str
    en_plural: str
    kind: str
    mass: bool = False  # Mass nouns (milk, water) stay singular and take no indefinite article.


class Adjective(NamedTuple):
    """An adjective: its four Portuguese forms, its English form, the noun kinds it fits."""

    forms: tuple[str, str, str, str]  # (m sg, f sg, m pl, f pl)
    en: str
    kinds: tuple[str, ...]
    copula: str = "ser"  # States (tired, hot, dirty) take `estar` as a predicate, traits `ser`.


class Verb(NamedTuple):
    """A verb: Portuguese present and past forms, English (base, 3rd singular, past)."""

    present: tuple[str, str, str, str]
    past: tuple[str, str, str, str]
    en: tuple[str, str, str]
    object_kinds: tuple[str, ...]
    animal_subject: bool = False


class Place(NamedTuple):
    """A place for `em`/`de` phrases: Portuguese forms and gender, English forms and preposition."""

    pt: str
    pt_plural: str
    gender: str
    en: str
    en_plural: str
    preposition: str  # English for `em`: "in", "at" or "on".


class Determiner(NamedTuple):
    """A determiner: Portuguese (m sg, f sg, m pl, f pl) and English (sg, pl); None = not used."""

    forms: tuple[str | None, str | None, str, str]
    en: str | None
    en_plural: str


def _n(pt: str, pt_plural: str, gender: str, en: str, en_plural: str, kind: str) -> Noun:
    return Noun(pt, pt_plural, gender, en, en_plural, kind)


NOUNS: dict[str, Noun] = {
    noun.pt: noun
    for noun in (
        _n("menino", "meninos", "m", "boy", "boys", PERSON),
        _n("menina", "meninas", "f", "girl", "girls", PERSON),
        _n("homem", "homens", "m", "man", "men", PERSON),
        _n("mulher", "mulheres", "f", "woman", "women", PERSON),
        _n("criança", "crianças", "f", "child", "children", PERSON),
        _n("professor", "professores", "m", "teacher", "teachers", PERSON),
        _n("médica", "médicas", "f", "doctor", "doctors", PERSON),
        _n("amigo", "amigos", "m", "friend", "friends", PERSON),
        _n("aluna", "alunas", "f", "student", "students", PERSON),
        _n("gato", "gatos", "m", "cat", "cats", ANIMAL),
        _n("cachorro", "cachorros", "m", "dog", "dogs", ANIMAL),
        _n("vaca", "vacas", "f", "cow", "cows", ANIMAL),
        _n("pássaro", "pássaros", "m", "bird", "birds", ANIMAL),
        _n("galinha", "galinhas", "f", "hen", "hens", ANIMAL),
        _n("bolo", "bolos", "m", "cake", "cakes", FOOD),
        _n("maçã", "maçãs", "f", "apple", "apples", FOOD),
        _n("laranja", "laranjas", "f", "orange", "oranges", FOOD),
        _n("ovo", "ovos", "m", "egg", "eggs", FOOD),
        _n("peixe", "peixes", "m", "fish", "fish", FOOD),
        _n("sanduíche", "sanduíches", "m", "sandwich", "sandwiches", FOOD),
        _n("livro", "livros", "m", "book", "books", READABLE),
        _n("carta", "cartas", "f", "letter", "letters", READABLE),
        _n("jornal", "jornais", "m", "newspaper", "newspapers", READABLE),
        _n("revista", "revistas", "f", "magazine", "magazines", READABLE),
        _n("poema", "poemas", "m", "poem", "poems", READABLE),
        _n("caixa", "caixas", "f", "box", "boxes", OPENABLE),
        _n("porta", "portas", "f", "door", "doors", OPENABLE),
        _n("janela", "janelas", "f", "window", "windows", OPENABLE),
        _n("garrafa", "garrafas", "f", "bottle", "bottles", OPENABLE),
        _n("copo", "copos", "m", "glass", "glasses", OBJECT),
        _n("chave", "chaves", "f", "key", "keys", OBJECT),
        _n("mesa", "mesas", "f", "table", "tables", OBJECT),
        _n("relógio", "relógios", "m", "watch", "watches", OBJECT),
        _n("lápis", "lápis", "m", "pencil", "pencils", OBJECT),
        _n("guarda-chuva", "guarda-chuvas", "m", "umbrella", "umbrellas", OBJECT),
        _n("carro", "carros", "m", "car", "cars", VEHICLE),
        _n("bicicleta", "bicicletas", "f", "bicycle", "bicycles", VEHICLE),
        _n("barco", "barcos", "m", "boat", "boats", VEHICLE),
        _n("ônibus", "ônibus", "m", "bus", "buses", VEHICLE),
    )
}
for _pt, _gender, _en in (
    ("leite", "m", "milk"),
    ("café", "m", "coffee"),
    ("suco", "m", "juice"),
    ("água", "f", "water"),
    ("cerveja", "f", "beer"),
    ("vinho", "m", "wine"),
):
    NOUNS[_pt] = Noun(_pt, _pt, _gender, _en, _en, DRINK, mass=True)


def _o(stem: str) -> tuple[str, str, str, str]:
    """The four forms of an adjective in -o: vermelh → vermelho, vermelha, vermelhos, vermelhas."""
    return (stem + "o", stem + "a", stem + "os", stem + "as")


def _same(singular: str, plural: str) -> tuple[str, str, str, str]:
    """An adjective with one form per number (grande, grandes)."""
    return (singular, singular, plural, plural)


ADJECTIVES: dict[str, Adjective] = {
    adjective.forms[0]: adjective
    for adjective in (
        Adjective(_o("vermelh"), "red", THING),
        Adjective(_o("amarel"), "yellow", THING),
        Adjective(_o("pret"), "black", THING + (ANIMAL,)),
        Adjective(_o("branc"), "white", THING + (ANIMAL,)),
        Adjective(_same("azul", "azuis"), "blue", THING),
        Adjective(_same("verde", "verdes"), "green", THING + (FOOD,)),
        Adjective(_same("grande", "grandes"), "big", ANIMATE + (FOOD,) + THING),
        Adjective(_o("pequen"), "small", ANIMATE + (FOOD,) + THING),
        Adjective(_o("nov"), "new", THING),
        Adjective(_o("velh"), "old", ANIMATE + THING),
        Adjective(_o("bonit"), "beautiful", ANIMATE + THING),
        Adjective(_o("car"), "expensive", THING + (FOOD, DRINK)),
        Adjective(_o("barat"), "cheap", THING + (FOOD, DRINK)),
        Adjective(_o("limp"), "clean", (OBJECT, OPENABLE, VEHICLE), "estar"),
        Adjective(_o("suj"), "dirty", (OBJECT, OPENABLE, VEHICLE), "estar"),
        Adjective(_o("fri"), "cold", (FOOD, DRINK), "estar"),
        Adjective(_o("delicios"), "delicious", (FOOD, DRINK)),
        Adjective(_same("quente", "quentes"), "hot", (FOOD, DRINK), "estar"),
        Adjective(_same("feliz", "felizes"), "happy", ANIMATE),
        Adjective(_o("cansad"), "tired", ANIMATE, "estar"),
        Adjective(_same("doente", "doentes"), "sick", ANIMATE, "estar"),
        Adjective(_same("inteligente", "inteligentes"), "intelligent", ANIMATE),
        Adjective(_o("alt"), "tall", (PERSON,)),
    )
}


def _ar(stem: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Present and past of a regular -ar verb."""
    present = tuple(stem + ending for ending in ("o", "a", "amos", "am"))
    return present, tuple(stem + ending for ending in ("ei", "ou", "amos", "aram"))


def _er(stem: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Present and past of a regular -er verb."""
    present = tuple(stem + ending for ending in ("o", "e", "emos", "em"))
    return present, tuple(stem + ending for ending in ("i", "eu", "emos", "eram"))


def _ir(stem: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Present and past of a regular -ir verb."""
    present = tuple(stem + ending for ending in ("o", "e", "imos", "em"))
    return present, tuple(stem + ending for ending in ("i", "iu", "imos", "iram"))


def _v(forms: tuple, en: str, kinds: tuple[str, ...], animal_subject: bool = False) -> Verb:
    base, third, past = en.split("|")
    return Verb(forms[0], forms[1], (base, third, past), kinds, animal_subject)


# Transitive verbs (infinitive → Verb); English irregular pasts: ate, drank, saw, bought, ...
TRANSITIVE_VERBS: dict[str, Verb] = {
    "comer": _v(_er("com"), "eat|eats|ate", (FOOD,), animal_subject=True),
    "beber": _v(_er("beb"), "drink|drinks|drank", (DRINK,), animal_subject=True),
    "ver": _v(
        (("vejo", "vê", "vemos", "veem"), ("vi", "viu", "vimos", "viram")),
        "see|sees|saw",
        ANIMATE + THING,
        animal_subject=True,
    ),
    "ler": _v(
        (("leio", "lê", "lemos", "leem"), ("li", "leu", "lemos", "leram")),
        "read|reads|read",
        (READABLE,),
    ),
    "querer": _v(
        (("quero", "quer", "queremos", "querem"), ("quis", "quis", "quisemos", "quiseram")),
        "want|wants|wanted",
        (FOOD, DRINK) + THING,
        animal_subject=True,
    ),
    "comprar": _v(_ar("compr"), "buy|buys|bought", (FOOD, DRINK) + THING),
    "vender": _v(_er("vend"), "sell|sells|sold", (FOOD,) + THING),
    "escrever": _v(_er("escrev"), "write|writes|wrote", (READABLE,)),
    "encontrar": _v(_ar("encontr"), "find|finds|found", ANIMATE + THING, animal_subject=True),
    "abrir": _v(_ir("abr"), "open|opens|opened", (OPENABLE, READABLE)),
    "fechar": _v(_ar("fech"), "close|closes|closed", (OPENABLE, READABLE)),
    "lavar": _v(_ar("lav"), "wash|washes|washed", (OBJECT, OPENABLE, VEHICLE, ANIMAL)),
    "procurar": _v(_ar("procur"), "look for|looks for|looked for", ANIMATE + THING),
    "visitar": _v(_ar("visit"), "visit|visits|visited", (PERSON,)),
    "ajudar": _v(_ar("ajud"), "help|helps|helped", (PERSON,)),
}

# Copulas (English "be": am/is/are, was/were) and `voltar de` ("return from"), each with its own
# sentence pattern: copula + adjective, `estar em` + place, `voltar de` + place.
COPULAS: dict[str, Verb] = {
    "ser": Verb(("sou", "é", "somos", "são"), ("era", "era", "éramos", "eram"), ("be",) * 3, ()),
    "estar": Verb(
        ("estou", "está", "estamos", "estão"),
        ("estava", "estava", "estávamos", "estavam"),
        ("be",) * 3,
        (),
    ),
}
VOLTAR = _v(_ar("volt"), "return from|returns from|returned from", ())
VERBS: dict[str, Verb] = {**TRANSITIVE_VERBS, **COPULAS, "voltar": VOLTAR}

PLACES: dict[str, Place] = {
    place.pt: place
    for place in (
        Place("parque", "parques", "m", "park", "parks", "in"),
        Place("jardim", "jardins", "m", "garden", "gardens", "in"),
        Place("quarto", "quartos", "m", "bedroom", "bedrooms", "in"),
        Place("mercado", "mercados", "m", "market", "markets", "at"),
        Place("restaurante", "restaurantes", "m", "restaurant", "restaurants", "at"),
        Place("escritório", "escritórios", "m", "office", "offices", "at"),
        Place("escola", "escolas", "f", "school", "schools", "at"),
        Place("praia", "praias", "f", "beach", "beaches", "at"),
        Place("biblioteca", "bibliotecas", "f", "library", "libraries", "at"),
        Place("cozinha", "cozinhas", "f", "kitchen", "kitchens", "in"),
        Place("cidade", "cidades", "f", "city", "cities", "in"),
        Place("rua", "ruas", "f", "street", "streets", "on"),
    )
}

# Keyed by the masculine singular form (the numerals by their masculine plural form).
DETERMINERS: dict[str, Determiner] = {
    "o": Determiner(("o", "a", "os", "as"), "the", "the"),
    "um": Determiner(("um", "uma", "uns", "umas"), "a", "some"),
    "meu": Determiner(("meu", "minha", "meus", "minhas"), "my", "my"),
    "seu": Determiner(("seu", "sua", "seus", "suas"), "your", "your"),
    "nosso": Determiner(("nosso", "nossa", "nossos", "nossas"), "our", "our"),
    "este": Determiner(("este", "esta", "estes", "estas"), "this", "these"),
    "dois": Determiner((None, None, "dois", "duas"), None, "two"),
    "três": Determiner((None, None, "três", "três"), None, "three"),
    "quatro": Determiner((None, None, "quatro", "quatro"), None, "four"),
    "cinco": Determiner((None, None, "cinco", "cinco"), None, "five"),
}

# Preposition + definite article contractions: (preposition, article) → contracted form.
CONTRACTIONS: dict[tuple[str, str], str] = {
    (preposition, article): prefix + article
    for preposition, prefix in (("de", "d"), ("em", "n"))
    for article in ("o", "a", "os", "as")
}

# Subject pronouns: pt → (English, verb slot 0-3 in the tables above, English person key).
PRONOUNS: dict[str, tuple[str, int, str]] = {
    "eu": ("i", 0, "1s"),
    "você": ("you", 1, "2s"),
    "ele": ("he", 1, "3s"),
    "ela": ("she", 1, "3s"),
    "nós": ("we", 2, "1p"),
    "eles": ("they", 3, "3p"),
    "elas": ("they", 3, "3p"),
}
