import numpy as np
import pytest
import tensorflow as tf

from tests.inference.decoding.teacher_forcing import assert_decodes_as_the_model
from tests.inference.decoding.test_cached_decode import (
    SRC,
    bigram_logits_fn,
    bigram_table,
    layered_model,
    tiny_model,
    while_body_ops,
)
from tf_transformer.inference.decoding.beam import (
    beam_search,
    gather_beams,
    gnmt_length_penalty,
    tile_beams,
    top_next_tokens,
)
from tf_transformer.inference.decoding.cached_decode import make_decode_fn, model_logits_fn
from tf_transformer.inference.decoding.greedy import greedy_decode
from tf_transformer.inference.decoding.search import next_token_log_probs

pytestmark = pytest.mark.cost(30)  # seconds in make test (measured)

PAD, UNK, START, END, A, B, C = range(7)


def cache_for(batch):
    return {"calls": tf.zeros([batch], tf.int32)}


def test_tile_and_gather_beams():
    cache = {"x": tf.constant([[1], [2]])}
    tiled = tile_beams(cache, 3)
    np.testing.assert_array_equal(tiled["x"].numpy()[:, 0], [1, 1, 1, 2, 2, 2])
    marked = {"x": tf.constant([[10], [11], [12], [20], [21], [22]])}
    parents = tf.constant([[2, 2, 0], [1, 0, 0]])
    gathered = gather_beams(marked, parents)["x"].numpy()[:, 0]
    np.testing.assert_array_equal(gathered, [12, 12, 10, 21, 20, 20])


def test_beam_search_finds_the_sequence_greedy_misses():
    # Greedy takes A (0.5) then C (0.3) then END: 0.5 * 0.3 * 1 = 0.15.
    # The best sequence is B END: 0.4 * 0.9 = 0.36.
    table = bigram_table(
        {
            START: {A: 0.5, B: 0.4, END: 0.1},
            A: {C: 0.3, UNK: 0.7 / 2, B: 0.7 / 2},
            B: {END: 0.9, C: 0.1},
            C: {END: 1.0},
            UNK: {END: 1.0},
        }
    )
    greedy = greedy_decode(bigram_logits_fn(table), cache_for(1), 1, max_new_tokens=5)
    beam = beam_search(
        bigram_logits_fn(table), cache_for(1), 1, 3, max_new_tokens=5, length_penalty=0.0
    )
    assert greedy.ids.numpy()[0, 1] == A
    np.testing.assert_array_equal(beam.ids.numpy(), [[START, B, END]])
    np.testing.assert_allclose(beam.log_probs.numpy(), [np.log(0.36)], rtol=1e-5)
    assert beam.log_probs.numpy()[0] > greedy.log_probs.numpy()[0]


SHORT_VS_LONG = bigram_table(
    # Short: END (0.3). Long: A END (0.28 * 0.97 = 0.2716), less probable but longer.
    {
        START: {END: 0.3, A: 0.28, B: 0.42 / 2, C: 0.42 / 2},
        A: {END: 0.97, C: 0.03},
        B: {C: 1.0},
        C: {C: 1.0},
    }
)


@pytest.mark.parametrize("length_penalty, expected", [(0.0, [START, END]), (1.0, [START, A, END])])
def test_length_penalty_picks_short_or_long_as_the_formula_says(length_penalty, expected):
    out = beam_search(
        bigram_logits_fn(SHORT_VS_LONG),
        cache_for(1),
        1,
        2,
        max_new_tokens=6,
        length_penalty=length_penalty,
        return_all_beams=True,
    )
    best = out.ids.numpy()[0, 0]
    np.testing.assert_array_equal(best[: len(expected)], expected)
    assert (best[len(expected) :] == PAD).all()
    # Scores against the formula ((5 + len) / 6) ** length_penalty, for the winner.
    log_prob = {1: np.log(0.3), 2: np.log(0.28 * 0.97)}[len(expected) - 1]
    length = len(expected) - 1
    np.testing.assert_allclose(out.lengths.numpy()[0, 0], length)
    np.testing.assert_allclose(out.log_probs.numpy()[0, 0], log_prob, rtol=1e-5)
    np.testing.assert_allclose(
        out.scores.numpy()[0, 0], log_prob / ((5 + length) / 6) ** length_penalty, rtol=1e-5
    )
    # And the two hypotheses compare as the formula says.
    short, long = np.log(0.3), np.log(0.28 * 0.97)
    assert (short > long * (6 / 7) ** length_penalty) == (length_penalty == 0.0)


def test_length_penalty_values():
    np.testing.assert_allclose(gnmt_length_penalty(tf.constant([1, 7]), 1.0).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(gnmt_length_penalty(tf.constant([3]), 0.0).numpy(), [1.0])


def test_finished_beams_stop_growing_and_keep_their_score():
    # The END hypothesis finishes at step 1; the C C C ... beam goes on to max_new_tokens.
    results = [
        beam_search(
            bigram_logits_fn(SHORT_VS_LONG),
            cache_for(1),
            1,
            2,
            max_new_tokens=n,
            length_penalty=0.0,
            return_all_beams=True,
            trim_ids=False,
        )
        for n in (3, 7)
    ]
    for out in results:
        ids, lengths = out.ids.numpy()[0], out.lengths.numpy()[0]
        finished = [b for b in range(2) if END in ids[b]]
        assert finished
        for b in finished:
            end = list(ids[b]).index(END)
            assert lengths[b] == end
            assert (ids[b, end + 1 :] == PAD).all()
    best = [out.scores.numpy()[0, 0] for out in results]
    assert best[0] == best[1]
    np.testing.assert_allclose(best[0], np.log(0.3), rtol=1e-6)


def test_beam_search_stops_when_every_beam_has_ended():
    table = bigram_table({START: {END: 0.5, A: 0.5}, A: {END: 1.0}})
    out = beam_search(bigram_logits_fn(table), cache_for(2), 2, 2, max_new_tokens=30)
    assert int(out.steps) == 2
    # Equal probabilities: the length penalty (length_penalty 0.6) prefers the longer one.
    np.testing.assert_array_equal(out.ids.numpy(), [[START, A, END]] * 2)


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_beam_one_equals_greedy(model):
    greedy = make_decode_fn(model, max_new_tokens=8)(SRC)

    @tf.function(autograph=False)  # as the package's own decoding functions
    def beam_one(src):
        logits_fn, cache = model_logits_fn(model, src, 8)
        return beam_search(logits_fn, cache, tf.shape(src)[0], 1, 8, length_penalty=0.6)

    out = beam_one(SRC)
    np.testing.assert_array_equal(out.ids.numpy(), greedy.ids.numpy())
    np.testing.assert_allclose(out.log_probs.numpy(), greedy.log_probs.numpy(), atol=1e-5)


@pytest.mark.parametrize("recompute", [False, True], ids=["cached", "recompute"])
def test_every_beam_is_scored_as_the_full_model_scores_it(model, recompute):
    # A beam reading another beam's cache rows, or a reorder gone wrong, gives its tokens
    # other log-probs than the full model does (teacher_forcing.py).
    kwargs = {"max_new_tokens": 7, "beam_size": 3, "length_penalty": 0.6, "return_all_beams": True}
    out = make_decode_fn(model, recompute=recompute, **kwargs)(SRC)
    assert_decodes_as_the_model(model, SRC, out, beam_size=3)
    scores = out.log_probs / gnmt_length_penalty(out.lengths, 0.6)
    np.testing.assert_allclose(out.scores.numpy(), scores.numpy(), rtol=1e-6)
    assert (np.diff(out.scores.numpy(), axis=1) <= 0).all()  # best first


@pytest.mark.parametrize("layout", ["graph", "xla"])
def test_beam_search_reorders_only_the_self_attention_cache(layout):
    # Cross-attention keys/values and the source mask stay per sentence, closed over: the only
    # cache tensors tiled and gathered per step are each layer's self-attention keys and values.
    model = layered_model(2)
    ops = while_body_ops(make_decode_fn(model, max_new_tokens=8, beam_size=3, step_layout=layout))
    assert ops["GatherNd"] == 2 * 2
    logits_fn, cache = model_logits_fn(model, SRC, 8, layout=layout)
    assert len(cache) == 2 and all(t.shape[0] == SRC.shape[0] for t in tf.nest.flatten(cache))
    out = beam_search(logits_fn, cache, SRC.shape[0], 3, 8, min_length=5, return_all_beams=True)
    assert_decodes_as_the_model(model, SRC, out, beam_size=3)


@pytest.mark.parametrize("min_length, step", [(0, 0), (3, 1), (3, 3)])
def test_top_next_tokens_are_the_top_k_of_the_banned_log_softmax(min_length, step):
    logits = tf.random.stateless_normal((6, 20), seed=[1, 2]) * 3
    values, ids = top_next_tokens(logits, 4, tf.constant(step), min_length, END)
    expected = tf.math.top_k(next_token_log_probs(logits, tf.constant(step), min_length, END), 4)
    np.testing.assert_array_equal(ids.numpy(), expected.indices.numpy())
    np.testing.assert_allclose(values.numpy(), expected.values.numpy(), rtol=1e-6, atol=1e-6)
