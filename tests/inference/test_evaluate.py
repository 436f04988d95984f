"""Tests for tf_transformer.inference.evaluate: cased BLEU headline, TED style, batching."""

from pathlib import Path

import pytest
import sacrebleu
import tensorflow as tf
from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

from tf_transformer.inference.evaluate import (
    evaluate,
    looks_ted_style,
    score,
    ted_style,
    translate_all,
)
from tf_transformer.text.detokenize import attach_punctuation

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.mark.parametrize(
    "hypothesis, expected",
    [
        ("Don't go.", "do n't go ."),
        ("Don't go, it's late.", "do n't go , it 's late ."),
        ("I can't; you won't!", "i ca n't ; you wo n't !"),
        ('He said: "It\'s late."', "he said : `` it 's late . ''"),
        ("The students' books (yes)...", "the students ' books ( yes ) ..."),
        ("Mr. Smith paid $1,000 at 10:30 in the U.S. at flor.com?", None),
        ("The boy's car is new.", "the boy 's car is new ."),
        ("i don ' t know", "i do n't know"),  # what tokenizers without re-attaching wrote
        ("do n't go .", "do n't go ."),  # already TED style: unchanged
    ],
)
def test_ted_style_tokenizes_like_the_references(hypothesis, expected):
    if expected is None:
        expected = "mr. smith paid $1,000 at 10:30 in the u.s. at flor.com ?"
    assert ted_style(hypothesis) == expected
    assert ted_style(expected) == expected


def test_looks_ted_style():
    assert looks_ted_style(["did they eat fish and chips ?", "i was worried ."])
    assert looks_ted_style(["the boy 's car is new .", "is the coffee hot ?"])  # sample corpus
    assert not looks_ted_style(["Did they eat fish and chips?", "I was worried."])
    assert not looks_ted_style(["did they eat fish and chips?", "i was worried."])
    assert not looks_ted_style([])


def test_cased_bleu_is_the_headline_with_lower_cased_beside_it():
    refs = ["The game was postponed because of the rain.", "Do you eat breakfast?"]
    hyps = ["the game was postponed because of the rain.", "do you eat breakfast?"]
    scores = score(hyps, refs)
    assert scores.bleu_lc == pytest.approx(100.0)
    assert scores.bleu == pytest.approx(80.91, abs=0.01)  # two capitals missing
    assert "case:mixed" in scores.bleu_signature and "tok:13a" in scores.bleu_signature
    assert "case:lc" in scores.bleu_lc_signature
    assert not scores.ted_style
    perfect = score(refs, refs)
    assert perfect.bleu == perfect.bleu_lc == pytest.approx(100.0)
    summary = perfect.summary()
    assert summary.startswith("BLEU 100.00 (lower-cased 100.00)  chrF 100.00  on 2 sentences")
    assert f"BLEU signature: {perfect.bleu_signature}" in summary
    assert f"BLEU lower-cased signature: {perfect.bleu_lc_signature}" in summary


def test_score_equals_plain_sacrebleu_on_raw_references():
    hyps = ["The cat sat on a mat.", "he reads the paper"]
    refs = ["The cat sat on the mat.", "He reads the newspaper."]
    scores = score(hyps, refs)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    lower = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score
    assert scores.bleu_lc == pytest.approx(lower) and scores.bleu_lc > scores.bleu
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)


def test_ted_references_are_matched_in_their_style():
    refs = ["i do n't know .", "it 's late , he said ."]
    hyps = ["I don't know.", "It's late, he said."]  # cased, detokenized: what we output now
    scores = score(hyps, refs)
    assert scores.ted_style
    assert scores.bleu == scores.bleu_lc == pytest.approx(100.0)
    assert "references are lower-cased and tokenized" in scores.summary()
    assert score(hyps, refs, ted=False).bleu_lc < 60


def test_ted_references_survive_detokenization_and_ted_style():
    """TED references, split as our tokenizers split them, re-attached by the detokenizer, then
    put back in TED style: nearly all come back exactly (the rest: TED's own doubled quotes)."""
    path = SHARED / "ted_hrlr_validation" / "dev.en"
    if not path.is_file():
        pytest.skip("../shared/data/ted_hrlr_validation is absent")
    refs = path.read_text(encoding="utf-8").splitlines()
    words = BasicTokenizer(lower_case=False, normalization_form="NFC").tokenize(tf.constant(refs))
    detokenized = attach_punctuation(tf.strings.reduce_join(words, separator=" ", axis=-1))
    hyps = [h.decode("utf-8") for h in detokenized.numpy()]
    assert "he hit his head." in hyps and "it's not because he didn't try." in hyps
    same = sum(ted_style(h) == r for h, r in zip(hyps, refs))
    scores = score(hyps, refs)
    print(f"TED dev: {same} of {len(refs)} exact, BLEU {scores.bleu:.2f}")
    assert scores.ted_style
    assert same >= 0.94 * len(refs)  # 1,129 of 1,193 today
    assert scores.bleu > 97.5  # 97.97 today


def test_sample_references_are_scored_fairly():
    sample = pytest.importorskip("tf_transformer.data.sample")
    refs = [en for _, en in sample.sample_pairs("test")][:300]
    hyps = [h.decode("utf-8") for h in attach_punctuation(tf.constant(refs)).numpy()]
    hyps = [h[:1].upper() + h[1:] for h in hyps]  # "The boy's car is new."
    assert hyps != refs
    scores = score(hyps, refs)
    assert scores.ted_style and scores.bleu == pytest.approx(100.0)


def test_misaligned_inputs_are_refused():
    with pytest.raises(ValueError, match="1 hypotheses for 2 references"):
        score(["a"], ["a", "b"])


def test_translate_all_keeps_order_and_batches_by_length():
    seen = []

    def fake(batch):
        seen.append(list(batch))
        return [s.upper() for s in batch]

    sources = ["ccc", "a", "bbbbb", "dd", "e"]
    assert translate_all(fake, sources, batch_size=2, progress=False) == [
        s.upper() for s in sources
    ]
    assert [len(b) for b in seen] == [2, 2, 1]
    assert seen[0] == ["a", "e"]  # shortest first


def test_evaluate_writes_hypotheses(tmp_path):
    pairs = [("o gato", "The black cat sleeps here."), ("o cão", "The big dog runs fast.")]
    table = {"o gato": "The black cat sleeps here.", "o cão": "the big dog runs."}
    scores, hyps = evaluate(
        lambda b: [table[s] for s in b], pairs, hypotheses_path=tmp_path / "hyp.txt", progress=False
    )
    assert (tmp_path / "hyp.txt").read_text() == "The black cat sleeps here.\nthe big dog runs.\n"
    assert hyps == ["The black cat sleeps here.", "the big dog runs."]
    assert 0 < scores.bleu < scores.bleu_lc < 100 and scores.num_sentences == 2
