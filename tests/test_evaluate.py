import pytest
import sacrebleu

from tf_transformer.inference.evaluate import (
    evaluate,
    looks_ted_style,
    score,
    ted_style,
    translate_all,
)


def test_ted_style_splits_clitics_like_the_references():
    assert ted_style("Don't go, it's late.") == "do n't go, it 's late."
    assert ted_style("i don ' t know") == "i do n't know"
    assert ted_style("do n't go .") == "do n't go ."  # already TED style: unchanged


def test_looks_ted_style():
    assert looks_ted_style(["did they eat fish and chips ?", "i was worried ."])
    assert not looks_ted_style(["Did they eat fish and chips?", "I was worried."])


def test_perfect_translation_scores_100_and_signature_says_lowercase():
    refs = ["The game was postponed because of the rain.", "Do you eat breakfast?"]
    scores = score(["the game was postponed because of the rain .", "do you eat breakfast ?"], refs)
    assert scores.bleu == pytest.approx(100.0)
    assert scores.bleu_cased < 100.0
    assert "case:lc" in scores.bleu_signature and "tok:13a" in scores.bleu_signature
    assert not scores.ted_style


def test_score_equals_plain_sacrebleu_on_raw_references():
    hyps = ["the cat sat on a mat .", "he reads the paper"]
    refs = ["The cat sat on the mat.", "He reads the newspaper."]
    expected = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score
    assert score(hyps, refs).bleu == pytest.approx(expected)
    assert score(hyps, refs).chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)


def test_ted_references_are_matched_in_their_style():
    refs = ["i do n't know .", "it 's late ."]
    scores = score(["i don't know .", "it's late ."], refs)
    assert scores.ted_style and scores.bleu == pytest.approx(100.0)
    assert score(["i don't know .", "it's late ."], refs, ted=False).bleu < 60


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
    pairs = [("o gato", "the black cat sleeps here ."), ("o cão", "the big dog runs fast .")]
    table = {"o gato": "the black cat sleeps here .", "o cão": "the big dog runs ."}
    scores, hyps = evaluate(
        lambda b: [table[s] for s in b], pairs, hypotheses_path=tmp_path / "hyp.txt", progress=False
    )
    assert (tmp_path / "hyp.txt").read_text() == "the black cat sleeps here .\nthe big dog runs .\n"
    assert 0 < scores.bleu < 100 and scores.num_sentences == 2
