"""Tests for tf_transformer.text.tokenizers: vocabulary build, round trips, [UNK], SavedModel reload."""

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import tensorflow as tf

from tf_transformer.data import load_dataset
from tf_transformer.text.tokenizers import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    build_tokenizers,
)

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
TATOEBA = SHARED / "data" / "tatoeba_pt_en"
FAST_LEARN = {"num_iterations": 1}  # one pass of the threshold search: small corpora, fast tests


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    sample = pytest.importorskip("tf_transformer.data.sample")
    pairs = sample.sample_pairs("train", size=2000)
    ds = tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))
    vocab_dir = tmp_path_factory.mktemp("vocab")
    return build_tokenizers(ds, vocab_size=1000, vocab_dir=vocab_dir, learn_params=FAST_LEARN)


def _texts(tensor):
    return [s.decode("utf-8") for s in tensor.numpy()]


def _bert_spacing(text):
    """Lower-cases and spaces out punctuation the way BERT's basic tokenizer splits words."""

    def is_punct(char):
        code = ord(char)
        ascii_punct = 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
        return ascii_punct or unicodedata.category(char).startswith("P")

    spaced = "".join(f" {c} " if is_punct(c) else c for c in unicodedata.normalize("NFC", text))
    spaced = re.sub(r"\s+", " ", spaced.lower()).strip()
    # detokenize glues English contractions back: "don ' t" -> "don't".
    return re.sub(r"([^\W\d_]) ' (s|t|re|ve|ll|d|m)\b", r"\1'\2", spaced)


def test_reserved_ids_and_vocab_files(tokenizers):
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)
    assert RESERVED_TOKENS == ("[PAD]", "[UNK]", "[START]", "[END]")
    for tok in (tokenizers.source, tokenizers.target):
        assert _texts(tok.get_reserved_tokens()) == list(RESERVED_TOKENS)
        vocab = Path(tok.get_vocab_path().numpy().decode()).read_text().splitlines()
        assert vocab[:4] == list(RESERVED_TOKENS)
        assert len(vocab) == int(tok.get_vocab_size()) <= 1000
        assert _texts(tok.lookup(tf.constant([[0, 1, 2, 3]], tf.int64)).flat_values) == vocab[:4]


def test_round_trip_on_sample_sentences(tokenizers):
    sample = pytest.importorskip("tf_transformer.data.sample")
    dev = sample.sample_pairs("dev")[:200]
    for index, tok in enumerate((tokenizers.source, tokenizers.target)):
        texts = [pair[index] for pair in dev]
        ids = tok.tokenize(tf.constant(texts))
        rows = ids.to_list()
        assert {row[0] for row in rows} == {START_ID}
        assert {row[-1] for row in rows} == {END_ID}
        assert UNK_ID not in ids.flat_values.numpy()
        # The sample text is lower-case with spaced punctuation, but "guarda-chuva" gets split.
        assert _texts(tok.detokenize(ids)) == [_bert_spacing(t) for t in texts]


def test_lower_cases_keeps_accents_and_spaces_punctuation(tokenizers):
    ids = tokenizers.source.tokenize(tf.constant(["As CRIANÇAS não estavam no parque?"]))
    assert _texts(tokenizers.source.detokenize(ids)) == ["as crianças não estavam no parque ?"]
    tokens = _texts(tokenizers.source.lookup(ids).flat_values)
    assert tokens[0] == "[START]" and tokens[-1] == "[END]"


def test_apostrophes_between_letters_are_glued_back(tokenizers):
    ids = tokenizers.target.tokenize(tf.constant(["I don't know the boy 's car ' here we'll see"]))
    assert _texts(tokenizers.target.detokenize(ids)) == ["i don't know the boy's car ' here we'll see"]


def test_dense_padded_ids_detokenize_like_ragged(tokenizers):
    ids = tokenizers.target.tokenize(tf.constant(["the children help a teacher .", "my boat ."]))
    dense = ids.to_tensor(default_value=PAD_ID)
    assert dense.shape[1] > int(ids.row_lengths()[1])  # the second row is padded with PAD
    expected = ["the children help a teacher .", "my boat ."]
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
        expected = [_bert_spacing(t) for t in texts]
        known = [(b, e) for b, e, unk in zip(back, expected, has_unk) if not unk]
        mismatches = [(b, e) for b, e in known if b != e]
        print(f"tatoeba dev {('pt', 'en')[index]}: {sum(has_unk)} of {len(texts)} with [UNK]")
        assert sum(has_unk) < 0.05 * len(texts)
        assert mismatches == []


@pytest.mark.slow
def test_saved_model_reloads_in_fresh_process(tokenizers, tmp_path):
    path = tmp_path / "tokenizers"
    tokenizers.save(path)
    texts = ["o menino bebe o suco ?", "Olá 😀 mundo"]
    expected_ids = tokenizers.source.tokenize(tf.constant(texts)).to_list()
    expected_en = _texts(tokenizers.target.detokenize(tf.constant([[2, 60, 70, 3, 0]], tf.int64)))
    script = (
        "import json, sys\n"
        "import tensorflow as tf\n"
        "import tensorflow_text  # registers the ops\n"
        "tok = tf.saved_model.load(sys.argv[1])\n"
        "ids = tok.source.tokenize(tf.constant(json.loads(sys.argv[2])))\n"
        "dense = tf.constant([[2, 60, 70, 3, 0]], tf.int64)\n"
        "print(json.dumps({'ids': ids.to_list(),\n"
        "  'en': [s.decode() for s in tok.target.detokenize(dense).numpy()],\n"
        "  'size': int(tok.target.get_vocab_size()),\n"
        "  'modules': sorted(m for m in sys.modules if m.startswith('tf_transformer'))}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path), json.dumps(texts)],
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
    assert reloaded["en"] == expected_en
    assert reloaded["size"] == int(tokenizers.target.get_vocab_size())
    assert expected_ids[1].count(UNK_ID) == 1  # the emoji
