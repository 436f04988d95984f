"""Tests for tf_transformer.text.tokenizers: vocabulary build, case, round trips, [UNK], reload."""

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_text as text
from tensorflow.core.protobuf import saved_model_pb2

from tests.written_text import written_pairs
from tf_transformer.data import load_dataset
from tf_transformer.text.tokenizers import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    Tokenizers,
    build_tokenizers,
    learn_vocab,
    load_tokenizers,
    write_vocab,
)

pytestmark = pytest.mark.cost(140)  # seconds in make test (measured)

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
TATOEBA = SHARED / "data" / "tatoeba_pt_en"
FAST_LEARN = {"num_iterations": 1}  # one pass of the threshold search: small corpora, fast tests


def _written_pairs(split: str, size: int | None = None) -> list[tuple[str, str]]:
    sample = pytest.importorskip("tf_transformer.data.sample")
    pairs = sample.sample_pairs(split) if size is None else sample.sample_pairs(split, size=size)
    return written_pairs(pairs)


def _dataset(pairs):
    return tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))


def _texts(tensor):
    return [s.decode("utf-8") for s in tensor.numpy()]


@pytest.fixture(scope="module")
def written_train():
    return _written_pairs("train", size=2000)


@pytest.fixture(scope="module")
def tokenizers(written_train, tmp_path_factory):
    """Cased (the default), learnt from sample sentences written with capitals: "The red car."."""
    vocab_dir = tmp_path_factory.mktemp("vocab")
    return build_tokenizers(
        _dataset(written_train), vocab_size=1000, vocab_dir=vocab_dir, learn_params=FAST_LEARN
    )


@pytest.fixture(scope="module")
def lower_tokenizers(written_train, tmp_path_factory):
    """The same corpus, with lower_case=True."""
    return build_tokenizers(
        _dataset(written_train),
        vocab_size=1000,
        vocab_dir=tmp_path_factory.mktemp("vocab_lc"),
        learn_params=FAST_LEARN,
        lower_case=True,
    )


@pytest.fixture(scope="module")
def saved_tokenizers(tokenizers, tmp_path_factory):
    """`tokenizers` saved once (a SavedModel), for the tests that reload it."""
    path = tmp_path_factory.mktemp("saved") / "tokenizers"
    tokenizers.save(path)
    return path


def test_reserved_ids_and_vocab_files(tokenizers):
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)
    assert RESERVED_TOKENS == ("[PAD]", "[UNK]", "[START]", "[END]")
    for tok in (tokenizers.source, tokenizers.target):
        assert _texts(tok.get_reserved_tokens()) == list(RESERVED_TOKENS)
        vocab = Path(tok.get_vocab_path().numpy().decode()).read_text().splitlines()
        assert vocab[:4] == list(RESERVED_TOKENS)
        assert len(vocab) == int(tok.get_vocab_size()) <= 1000
        assert _texts(tok.lookup(tf.constant([[0, 1, 2, 3]], tf.int64)).flat_values) == vocab[:4]


def test_round_trip_on_sample_sentences(tokenizers, lower_tokenizers):
    dev = _written_pairs("dev")[:200]
    for index, role in enumerate(("source", "target")):
        texts = [pair[index] for pair in dev]
        for toks in (tokenizers, lower_tokenizers):
            tok = getattr(toks, role)
            ids = tok.tokenize(tf.constant(texts))
            rows = ids.to_list()
            assert {row[0] for row in rows} == {START_ID}
            assert {row[-1] for row in rows} == {END_ID}
            assert UNK_ID not in ids.flat_values.numpy()
            # Written text comes back as written ("The boy's car is new.", "guarda-chuva"),
            # cased or lower-cased as the tokenizer's flag says.
            expected = texts if toks is tokenizers else [t.lower() for t in texts]
            assert _texts(tok.detokenize(ids)) == expected


def test_case_is_kept_by_default_and_saved(
    tokenizers, lower_tokenizers, saved_tokenizers, tmp_path
):
    sentence = tf.constant(["As crianças NÃO estavam no parque?"])
    assert not tokenizers.source.lower_case.numpy() and lower_tokenizers.target.lower_case.numpy()
    cased = tokenizers.source.tokenize(sentence)
    # "NÃO" never occurs in capitals in the corpus: its letters are not in the vocabulary.
    assert _texts(tokenizers.source.detokenize(cased)) == ["As crianças [UNK] estavam no parque?"]
    lower = lower_tokenizers.source.tokenize(sentence)
    assert _texts(lower_tokenizers.source.detokenize(lower)) == [
        "as crianças não estavam no parque?"
    ]
    tokens = _texts(lower_tokenizers.source.lookup(lower).flat_values)
    assert tokens[0] == "[START]" and tokens[-1] == "[END]"
    # The flag travels with the SavedModel: a loaded tokenizer knows it and acts on it.
    lower_tokenizers.save(tmp_path / "lower")
    for toks, path in ((tokenizers, saved_tokenizers), (lower_tokenizers, tmp_path / "lower")):
        loaded = load_tokenizers(path)
        for role in ("source", "target"):
            assert bool(getattr(loaded, role).lower_case.numpy()) == (toks is lower_tokenizers)
        expected = toks.source.tokenize(sentence).to_list()
        assert loaded.source.tokenize(sentence).to_list() == expected


def test_shared_vocab_gives_both_languages_one_vocabulary(written_train, tokenizers, tmp_path):
    shared = build_tokenizers(
        _dataset(written_train),
        vocab_size=1000,
        vocab_dir=tmp_path / "vocab",
        learn_params=FAST_LEARN,
        shared_vocab=True,
    )
    vocab = _texts(shared.source.vocab)
    assert _texts(shared.target.vocab) == vocab and len(vocab) <= 1000
    assert _texts(tokenizers.source.vocab) != _texts(tokenizers.target.vocab)  # not shared
    files = sorted((tmp_path / "vocab").iterdir())
    assert [f.name for f in files] == ["source.pt.vocab", "target.en.vocab"]
    assert files[0].read_text() == files[1].read_text()
    # Either language, either role: the same ids, no [UNK], and the text comes back.
    shared.save(tmp_path / "saved")
    loaded = load_tokenizers(tmp_path / "saved")
    for sentence in written_train[0]:
        ids = [t.tokenize(tf.constant([sentence])) for t in (shared.source, loaded.target)]
        assert ids[0].to_list() == ids[1].to_list() and UNK_ID not in ids[0].flat_values.numpy()
        assert _texts(loaded.target.detokenize(ids[0])) == [sentence]


def test_vocabulary_learner_keeps_case_unless_asked():
    texts = tf.data.Dataset.from_tensor_slices(["Tom saw tom .", "Tom and Mary ?"] * 20)
    cased = learn_vocab(texts, 100, learn_params=FAST_LEARN)
    lower = learn_vocab(texts, 100, learn_params=FAST_LEARN, lower_case=True)
    assert {"Tom", "tom", "Mary"} <= set(cased)
    assert {"tom", "mary"} <= set(lower)
    assert all(token == token.lower() for token in lower[len(RESERVED_TOKENS) :])


class _LegacyTokenizer(tf.Module):
    """What `Tokenizers.save` wrote before the `lower_case` flag: lower-cases, saves no flag."""

    def __init__(self, vocab_path):
        super().__init__()
        self.tokenizer = text.BertTokenizer(
            str(vocab_path), lower_case=False, normalization_form="NFC"
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        words = self.tokenizer.tokenize(tf.strings.lower(strings, encoding="utf-8"))
        return words.merge_dims(-2, -1)


def test_tokenizers_saved_before_the_flag_still_lower_case(tmp_path):
    vocab = write_vocab([*RESERVED_TOKENS, "olá", "mundo"], tmp_path / "vocab.txt")
    legacy = tf.Module()
    legacy.pt, legacy.en = _LegacyTokenizer(vocab), _LegacyTokenizer(vocab)  # the oldest layout
    tf.saved_model.save(legacy, str(tmp_path / "legacy"))
    loaded = load_tokenizers(tmp_path / "legacy")
    assert bool(loaded.source.lower_case.numpy()) and bool(loaded.target.lower_case.numpy())
    assert _texts(loaded.languages) == ["pt", "en"]
    ids = loaded.source.tokenize(tf.constant(["Olá MUNDO", "olá mundo"])).to_list()
    assert ids[0] == ids[1] == [4, 5]
    # New tokenizers on the same vocabulary keep case: a capital is unknown to it.
    cased = Tokenizers(vocab, vocab)
    assert cased.source.tokenize(tf.constant(["Olá mundo"])).to_list() == [[2, 1, 5, 3]]


def test_apostrophes_between_letters_are_glued_back(tokenizers):
    ids = tokenizers.target.tokenize(tf.constant(["I don't know the boy 's car ' here we'll see"]))
    assert _texts(tokenizers.target.detokenize(ids)) == [
        "I don't know the boy's car ' here we'll see"
    ]


def test_dense_padded_ids_detokenize_like_ragged(tokenizers):
    ids = tokenizers.target.tokenize(tf.constant(["The children help a teacher .", "my boat ."]))
    dense = ids.to_tensor(default_value=PAD_ID)
    assert dense.shape[1] > int(ids.row_lengths()[1])  # the second row is padded with PAD
    expected = ["The children help a teacher.", "my boat."]
    assert _texts(tokenizers.target.detokenize(ids)) == expected
    assert _texts(tokenizers.target.detokenize(dense)) == expected
    assert _texts(tokenizers.target.detokenize(tf.cast(dense, tf.int32))) == expected
    # What a batched decoder emits: tokens after [END] are ignored.
    junk = tf.concat([dense, tf.fill([2, 3], tf.constant(10, tf.int64))], axis=1)
    assert _texts(tokenizers.target.detokenize(junk)) == expected


def test_unknown_characters_map_to_unk(tokenizers):
    ids = tokenizers.target.tokenize(tf.constant(["the cat 😀 漢字", "", "ø"]))
    rows = [row.tolist() for row in ids.numpy()]
    assert rows[0][0] == START_ID and rows[0][-1] == END_ID
    assert rows[0].count(UNK_ID) == 3  # the emoji and each CJK character (split apart)
    assert rows[1] == [START_ID, END_ID]
    assert rows[2] == [START_ID, UNK_ID, END_ID]
    assert _texts(tokenizers.target.detokenize(ids)) == ["the cat [UNK] [UNK] [UNK]", "", "[UNK]"]


def test_tatoeba_dev_round_trip(tmp_path):
    if not (TATOEBA / "train.pt").is_file():
        pytest.skip("../shared/data/tatoeba_pt_en is absent")
    train = load_dataset(TATOEBA, "train").take(1000)
    tok = build_tokenizers(train, vocab_size=1000, vocab_dir=tmp_path, learn_params=FAST_LEARN)
    dev = [(p.numpy().decode(), e.numpy().decode()) for p, e in load_dataset(TATOEBA, "dev")]
    for index, lang_tok in enumerate((tok.source, tok.target)):
        texts = [pair[index] for pair in dev]
        ids = lang_tok.tokenize(tf.constant(texts))
        has_unk = [UNK_ID in row for row in ids.numpy()]
        back = _texts(lang_tok.detokenize(ids))
        # Cased, detokenized: the sentences come back exactly as Tatoeba writes them.
        expected = [unicodedata.normalize("NFC", t) for t in texts]
        known = [(b, e) for b, e, unk in zip(back, expected, has_unk) if not unk]
        mismatches = [(b, e) for b, e in known if b != e]
        print(f"tatoeba dev {('pt', 'en')[index]}: {sum(has_unk)} of {len(texts)} with [UNK]")
        assert sum(has_unk) < 0.05 * len(texts)
        assert mismatches == []


@pytest.mark.slow
def test_saved_model_reloads_in_fresh_process(tokenizers, saved_tokenizers, tmp_path):
    path = saved_tokenizers
    texts = ["O menino bebe o suco?", "Olá 😀 mundo"]
    written = "The boy's car? I don't see it."
    expected_ids = tokenizers.source.tokenize(tf.constant(texts)).to_list()
    written_ids = tokenizers.target.tokenize(tf.constant([written]))
    script = (
        "import json, sys\n"
        "import tensorflow as tf\n"
        "import tensorflow_text  # registers the ops\n"
        "tok = tf.saved_model.load(sys.argv[1])\n"
        "ids = tok.source.tokenize(tf.constant(json.loads(sys.argv[2])))\n"
        "dense = tf.ragged.constant(json.loads(sys.argv[3]), tf.int64).to_tensor()\n"
        "print(json.dumps({'ids': ids.to_list(),\n"
        "  'en': [s.decode() for s in tok.target.detokenize(dense).numpy()],\n"
        "  'lower_case': bool(tok.source.lower_case.numpy()),\n"
        "  'size': int(tok.target.get_vocab_size()),\n"
        "  'modules': sorted(m for m in sys.modules if m.startswith('tf_transformer'))}))\n"
    )
    args = [json.dumps(texts), json.dumps(written_ids.to_list())]
    result = subprocess.run(
        [sys.executable, "-c", script, str(path), *args],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
        cwd=tmp_path,  # so the project package cannot be imported by accident
    )
    assert result.returncode == 0, result.stderr[-2000:]
    reloaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert reloaded["modules"] == []
    assert reloaded["ids"] == expected_ids
    assert reloaded["en"] == [written]  # cased, punctuation re-attached: in the saved graph
    assert reloaded["lower_case"] is False
    assert reloaded["size"] == int(tokenizers.target.get_vocab_size())
    assert expected_ids[1].count(UNK_ID) == 1  # the emoji


def test_save_traces_each_input_form_once_and_keeps_every_form(written_train, tmp_path):
    # `tf.saved_model.save` traces a function's recorded input forms again under its save
    # context unless they were traced under it; `Tokenizers.save` traces them there.
    toks = build_tokenizers(_dataset(written_train[:200]), vocab_size=300, learn_params=FAST_LEARN)
    toks.save(tmp_path / "saved")
    for tok in (toks.source, toks.target):
        functions = (tok.tokenize, tok.detokenize, tok.lookup, tok._detokenize_dense)
        # The three forms of `detokenize` share one trace of its text work.
        assert [f.experimental_get_tracing_count() for f in functions] == [1, 3, 2, 1]
    saved = saved_model_pb2.SavedModel.FromString(
        (tmp_path / "saved" / "saved_model.pb").read_bytes()
    )
    names = [f.signature.name for f in saved.meta_graphs[0].graph_def.library.function]
    assert sum("_detokenize_dense" in name for name in names) == 2  # one a language
    loaded = load_tokenizers(tmp_path / "saved").target
    ids = [[START_ID, 10, 11, END_ID]]
    forms = (
        tf.constant(ids, tf.int64),
        tf.constant(ids, tf.int32),
        tf.ragged.constant(ids, tf.int64),
    )
    assert len({loaded.detokenize(form).numpy()[0] for form in forms}) == 1
    dense, ragged = (loaded.lookup(form).to_list() for form in forms[::2])
    assert dense == ragged and dense[0][0] == b"[START]"


@pytest.mark.parametrize("shared_vocab", [False, True], ids=["two_vocabs", "shared_vocab"])
def test_lower_case_source_ignores_source_case_and_keeps_target_case(
    written_train, shared_vocab, tmp_path
):
    toks = build_tokenizers(
        _dataset(written_train),
        vocab_size=1000,
        vocab_dir=tmp_path / "vocab",
        learn_params=FAST_LEARN,
        lower_case_source=True,
        shared_vocab=shared_vocab,
    )
    source_vocab, target_vocab = _texts(toks.source.vocab), _texts(toks.target.vocab)
    assert "The" in target_vocab and "the" in target_vocab
    # Learnt lower-cased: a cased vocabulary has "Ela" (sentence starts), not "ela".
    assert "ela" in source_vocab and "Ela" not in source_vocab
    if shared_vocab:  # lower-cased source and cased target text, one vocabulary
        assert source_vocab == target_vocab
    else:
        assert all(t == t.lower() for t in source_vocab[len(RESERVED_TOKENS) :])
    toks.save(tmp_path / "saved")
    loaded = load_tokenizers(tmp_path / "saved")
    for tok in (toks, loaded):
        assert bool(tok.source.lower_case.numpy()) and not bool(tok.target.lower_case.numpy())
        source = tok.source.tokenize(tf.constant(["O Carro", "o carro", "O CARRO"])).to_list()
        assert source[0] == source[1] == source[2] and UNK_ID not in source[0]
        assert _texts(tok.source.detokenize(tf.ragged.constant(source[:1], tf.int64))) == [
            "o carro"
        ]
        target = tok.target.tokenize(tf.constant(["The car", "the car"])).to_list()
        assert target[0][1] != target[1][1] and target[0][2:] == target[1][2:]
        assert _texts(tok.target.detokenize(tf.ragged.constant(target, tf.int64))) == [
            "The car",
            "the car",
        ]


def test_vocab_min_count_reaches_the_learner_and_bounds_a_small_corpus_vocabulary(tmp_path):
    # 400 sample pairs: at the learner's default (a piece seen 10 times) the vocabulary stays
    # far below the 4,000 asked for; pieces seen twice make a larger one.
    from tf_transformer.config import DataConfig, TrainConfig
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import prepare_tokenizers

    pairs = _dataset(sample_pairs("train")[:400])
    sizes = {}
    for count in (10, 2):
        config = TrainConfig(vocab_size=4000, vocab_min_count=count)
        tokenizers = prepare_tokenizers(
            RunDir(tmp_path), pairs, DataConfig("sample"), config, reuse=False, save=False
        )
        sizes[count] = int(tokenizers.target.get_vocab_size())
    assert sizes[10] < sizes[2] < 4000, sizes
    with pytest.raises(ValueError, match="vocab_min_count must be positive"):
        TrainConfig(vocab_min_count=0)


def test_vocab_max_words_reaches_the_learner_and_leaves_out_the_rarer_words(tmp_path):
    # 400 sample pairs: learnt from the 60 most frequent target words only (every piece kept,
    # vocab_min_count 1), the vocabulary is less than half the size learnt from all of them.
    from tf_transformer.config import DataConfig, TrainConfig
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import prepare_tokenizers

    pairs = _dataset(sample_pairs("train")[:400])
    vocabs = {}
    for words in (TrainConfig().vocab_max_words, 60):
        config = TrainConfig(vocab_size=4000, vocab_min_count=1, vocab_max_words=words)
        tokenizers = prepare_tokenizers(
            RunDir(tmp_path), pairs, DataConfig("sample"), config, reuse=False, save=False
        )
        vocabs[words] = {token.decode() for token in tokenizers.target.vocab.numpy()}
    whole, top = vocabs[TrainConfig().vocab_max_words], vocabs[60]
    assert len(top) < len(whole) / 2, (len(top), len(whole))
    with pytest.raises(ValueError, match="vocab_max_words must be positive"):
        TrainConfig(vocab_max_words=0)


def test_a_source_vocabulary_learnt_in_a_second_process_is_the_one_learnt_here(monkeypatch, capfd):
    # From PARALLEL_WORDS distinct words on, the source's WordPiece is learnt in a spawned
    # process while the target's is learnt here: lowered to 1, this small corpus takes that path.
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.text import vocab

    pairs = _dataset(sample_pairs("train")[:300])
    here = build_tokenizers(pairs, vocab_size=500, learn_params=FAST_LEARN, progress=True)
    assert "second process" not in capfd.readouterr().err
    monkeypatch.setattr(vocab, "PARALLEL_WORDS", 1)
    there = build_tokenizers(pairs, vocab_size=500, learn_params=FAST_LEARN, progress=True)
    assert "words (in a second process)" in capfd.readouterr().err
    for role in ("source", "target"):
        tokens = [getattr(t, role).vocab.numpy().tolist() for t in (here, there)]
        assert tokens[0] == tokens[1] and len(tokens[0]) > 100


def test_a_shared_vocabulary_learns_from_vocab_max_words_of_each_language(tmp_path):
    # The shared vocabulary counts both languages' words: it is learnt from 2N of them.
    from tf_transformer.config import DataConfig, TrainConfig
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import prepare_tokenizers

    pairs = _dataset(sample_pairs("train")[:400])
    config = TrainConfig(vocab_size=4000, vocab_min_count=1, vocab_max_words=40, shared_vocab=True)
    tokenizers = prepare_tokenizers(
        RunDir(tmp_path), pairs, DataConfig("sample"), config, reuse=False, save=False
    )
    vocabs = {}
    for words in (40, 80):
        learnt = build_tokenizers(
            pairs,
            vocab_size=4000,
            shared_vocab=True,
            learn_params={"lower_thresh": 1, "max_input_tokens": words},
        )
        vocabs[words] = learnt.source.vocab.numpy().tolist()
    assert tokenizers.source.vocab.numpy().tolist() == vocabs[80] != vocabs[40]
