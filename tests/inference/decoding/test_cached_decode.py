import collections
import functools

import numpy as np
import pytest
import tensorflow as tf

from tests.inference.decoding.teacher_forcing import (
    assert_decodes_as_the_model,
    assert_greedy_choices_are_the_models,
    assert_scored_as_the_model,
)
from tf_transformer.backends.litert.layout import LiteRTLayout
from tf_transformer.config import get_preset
from tf_transformer.inference.decoding.cached_decode import (
    make_decode_fn,
    model_logits_fn,
    pad_to_multiple,
    recompute_logits_fn,
)
from tf_transformer.inference.decoding.greedy import greedy_decode
from tf_transformer.inference.decoding.search import write_column
from tf_transformer.model import Transformer

pytestmark = pytest.mark.cost(280)  # seconds in make test (measured)

PAD, UNK, START, END, A, B, C = range(7)
VOCAB = 7


def bigram_logits_fn(table):
    """A scripted seam: the next-token log-probs depend only on the current token.

    The cache counts calls per row, so tests can see that it is threaded through the loop.
    """
    table = tf.math.log(tf.constant(table, tf.float32) + 1e-12)

    def logits_fn(ids, step, cache):
        return tf.gather(table, ids), {"calls": cache["calls"] + 1}

    return logits_fn


def bigram_table(rows):
    table = np.full((VOCAB, VOCAB), 0.0)
    table[:, PAD] = 1.0  # rows not scripted: anything, they are never reached
    for token, probs in rows.items():
        table[token] = 0.0
        for nxt, p in probs.items():
            table[token, nxt] = p
    return table / table.sum(axis=1, keepdims=True)


def tiny_model():
    config = get_preset("tiny").replace(
        num_layers=1, d_model=16, dff=32, input_vocab_size=30, target_vocab_size=40
    )
    model = Transformer.from_config(config)
    model.build()
    return model


# Different source lengths, padded.
SRC = tf.constant([[2, 5, 6, 7, 8, 3], [2, 9, 3, 0, 0, 0], [2, 11, 12, 13, 3, 0]], tf.int64)


def test_write_column_writes_one_column():
    buffer = tf.zeros((2, 4), tf.int32)
    out = write_column(buffer, 2, tf.constant([7, 9]))
    np.testing.assert_array_equal(out.numpy(), [[0, 0, 7, 0], [0, 0, 9, 0]])


def test_greedy_follows_the_scripted_argmax_and_pads_after_end():
    table = bigram_table({START: {A: 0.6, B: 0.4}, A: {B: 0.7, END: 0.3}, B: {END: 0.9, C: 0.1}})
    cache = {"calls": tf.zeros([2], tf.int32)}
    out = greedy_decode(bigram_logits_fn(table), cache, 2, max_new_tokens=6)
    np.testing.assert_array_equal(out.ids.numpy(), [[START, A, B, END]] * 2)
    np.testing.assert_array_equal(out.lengths.numpy(), [3, 3])
    np.testing.assert_allclose(out.log_probs.numpy(), [np.log(0.6 * 0.7 * 0.9)] * 2, rtol=1e-5)
    np.testing.assert_array_equal(out.scores.numpy(), out.log_probs.numpy())


def test_greedy_stops_early_when_every_sequence_has_ended():
    table = bigram_table({START: {END: 0.9, A: 0.1}})
    cache = {"calls": tf.zeros([3], tf.int32)}
    out = greedy_decode(bigram_logits_fn(table), cache, 3, max_new_tokens=20)
    assert int(out.steps) == 1
    np.testing.assert_array_equal(out.ids.numpy(), [[START, END]] * 3)


def test_min_length_bans_end_and_forces_the_length():
    table = bigram_table({START: {END: 0.9, A: 0.1}, A: {END: 0.9, A: 0.1}})
    cache = {"calls": tf.zeros([1], tf.int32)}
    out = greedy_decode(bigram_logits_fn(table), cache, 1, max_new_tokens=5, min_length=5)
    assert int(out.steps) == 5
    np.testing.assert_array_equal(out.ids.numpy(), [[START, A, A, A, A, A]])


def test_finished_sequence_emits_pad_while_others_continue():
    # Row 0 starts from A (ends at once), row 1 from B (continues with C forever).
    table = bigram_table({A: {END: 1.0}, B: {C: 1.0}, C: {C: 1.0}})
    logits_fn = bigram_logits_fn(table)

    def from_row_token(ids, step, cache):
        first = tf.where(tf.equal(step, 0), tf.constant([A, B]), ids)
        return logits_fn(first, step, cache)

    cache = {"calls": tf.zeros([2], tf.int32)}
    out = greedy_decode(from_row_token, cache, 2, max_new_tokens=4)
    np.testing.assert_array_equal(out.ids.numpy(), [[START, END, 0, 0, 0], [START, C, C, C, C]])
    np.testing.assert_array_equal(out.lengths.numpy(), [1, 4])
    np.testing.assert_allclose(out.log_probs.numpy(), [0.0, 0.0], atol=1e-5)


@pytest.fixture(scope="module")
def model():
    # Seeded: unseeded, the weights differed from run to run, and one `make test` run in three
    # saw XLA's beam-4 ids differ from the graph's in one row (a near-tie, as we read it).
    tf.keras.utils.set_random_seed(0)
    return tiny_model()


@pytest.mark.parametrize("recompute", [False, True], ids=["cached", "recompute"])
def test_greedy_chooses_and_scores_as_the_full_model(model, recompute):
    # The full model on the decoded ids (teacher_forcing.py) is the reference: the same as
    # recompute's ids wherever rounding cannot flip a choice.
    out = make_decode_fn(model, max_new_tokens=8, recompute=recompute)(SRC)
    assert_decodes_as_the_model(model, SRC, out, beam_size=1)


@pytest.fixture(scope="module")
def tied_model(model):
    """`model`'s configuration with the target embeddings shared, built once."""
    tied = Transformer.from_config(model.config.replace(share_target_embeddings=True))
    tied.build()
    return tied


@pytest.mark.parametrize("variant", ["one layer", "two layers", "tied"])
@pytest.mark.parametrize("layout", ["graph", "xla"])
def test_cached_seam_logits_match_recompute_seam_logits(model, tied_model, layout, variant):
    if variant == "two layers":  # each layer keeps its own cache
        model = layered_model(2)
    elif variant == "tied":  # the output projection is the embedding matrix (transposed once)
        model = tied_model
    src = tf.cast(SRC, tf.int32)
    cached_fn, cached = model_logits_fn(model, src, 5, layout=layout)
    recompute_fn, reference = recompute_logits_fn(model, src, 5)
    for step, token in enumerate([START, 7, 8, 9]):
        ids = tf.fill([3], token)
        a, cached = cached_fn(ids, step, cached)
        b, reference = recompute_fn(ids, step, reference)
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


@pytest.fixture(scope="module")
def gelu_models():
    """Two layers with the GELU feed-forward, untied and tied, the same seed."""
    models = {}
    for tied in (False, True):
        tf.keras.utils.set_random_seed(1)
        models[tied] = layered_model(2, activation="gelu", share_target_embeddings=tied)
    return models


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("beam_size", [1, 3], ids=["greedy", "beam"])
def test_cached_decoding_equals_recompute_under_gelu(gelu_models, beam_size, tied):
    # The cached step runs the layers' own feed-forward: a new activation needs no second copy.
    model = gelu_models[tied]
    assert model.decoder.stack[1].ffn.inner.activation is tf.keras.activations.gelu
    options = {"max_new_tokens": 5, "beam_size": beam_size, "return_all_beams": beam_size > 1}
    for layout in ("graph", "xla"):
        cached = make_decode_fn(model, **options, step_layout=layout)(SRC)
        assert_decodes_as_the_model(model, SRC, cached, beam_size=beam_size)


@pytest.mark.parametrize("layout", ["graph", "xla"])
def test_cached_logits_follow_the_activation(gelu_models, layout):
    # The same weights with ReLU give other logits, and the cached step follows either.
    gelu = gelu_models[False]
    relu = layered_model(2)
    relu.set_weights(gelu.get_weights())
    src = tf.cast(SRC, tf.int32)
    firsts = []
    for model in (gelu, relu):
        cached_fn, cached = model_logits_fn(model, src, 3, layout=layout)
        recompute_fn, reference = recompute_logits_fn(model, src, 3)
        for step, token in enumerate([START, 7, 8]):
            ids = tf.fill([3], token)
            a, cached = cached_fn(ids, step, cached)
            b, reference = recompute_fn(ids, step, reference)
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)
        firsts.append(a.numpy())
    assert np.abs(firsts[0] - firsts[1]).max() > 1e-3


def test_max_new_tokens_beyond_the_positional_table_is_refused(model):
    with pytest.raises(ValueError, match="positional table"):
        model_logits_fn(model, SRC, model.config.max_length + 1)


# XLA picks the "xla" step layout (heads merged, attention as products and sums); 40 positions
# make it split the cache length into two axes. The LiteRT layout (per-head caches) runs under
# XLA too.
@pytest.mark.parametrize(
    "beam_size, max_new_tokens, step_layout",
    [(1, 6, None), (3, 6, None), (1, 40, None), (4, 40, None), (3, 6, LiteRTLayout)],
)
def test_xla_decoding_chooses_and_scores_as_the_full_model(
    model, beam_size, max_new_tokens, step_layout
):
    # Not compared with graph mode's ids: under XLA the sums round in another order, and an
    # unseeded model once flipped a beam-4 near-tie between the two (teacher_forcing.py).
    options = {
        "max_new_tokens": max_new_tokens,
        "min_length": max_new_tokens // 2,
        "beam_size": beam_size,
        "return_all_beams": beam_size > 1,
    }
    xla = make_decode_fn(model, **options, jit_compile=True, step_layout=step_layout)(SRC)
    assert_decodes_as_the_model(
        model, SRC, xla, beam_size=beam_size, min_length=options["min_length"]
    )


def test_an_unknown_step_layout_is_refused(model):
    with pytest.raises(ValueError, match="layout must be one of"):
        model_logits_fn(model, SRC, 5, layout="fast")


def test_the_graph_layout_under_xla_is_refused_before_compiling(model):
    with pytest.raises(ValueError, match="step_layout 'graph' runs without XLA only"):
        make_decode_fn(model, max_new_tokens=5, jit_compile=True, step_layout="graph")


def test_pad_to_multiple_appends_pad_columns():
    ids = tf.constant([[5, 6, 7], [8, 0, 0]], tf.int64)
    np.testing.assert_array_equal(pad_to_multiple(ids, 4).numpy(), [[5, 6, 7, 0], [8, 0, 0, 0]])
    assert pad_to_multiple(ids, 3).shape == (2, 3)
    # Never past the positional table: a 20-position model padded to multiples of 16.
    assert pad_to_multiple(ids, 16, limit=20).shape == (2, 16)
    assert pad_to_multiple(tf.zeros([1, 17], tf.int64), 16, limit=20).shape == (1, 20)
    assert pad_to_multiple(tf.zeros([1, 20], tf.int64), 16, limit=20).shape == (1, 20)


def while_body_ops(decode_fn) -> collections.Counter:
    """Op types of the decoding loop's body (one generated token), Const/Identity/NoOp left out."""
    graph = decode_fn.get_concrete_function().graph.as_graph_def()
    (body,) = [f for f in graph.library.function if "while_body" in f.signature.name]
    return collections.Counter(
        node.op for node in body.node_def if node.op not in ("Const", "Identity", "NoOp")
    )


@functools.cache
def layered_model(num_layers, norm_first=False, **changes):
    """A built tiny model of `num_layers` layers, one per set of arguments (the tests that take
    one only read its weights, or set them all)."""
    config = get_preset("tiny").replace(
        num_layers=num_layers,
        norm_first=norm_first,
        input_vocab_size=30,
        target_vocab_size=40,
        **changes,
    )
    model = Transformer.from_config(config)
    model.build()
    return model


# The op budget of one decoding step (graph mode, greedy), measured when set: 83 ops per
# decoder layer and 38 for the rest, in the traced graph. The step runs the layers' own code:
# per layer 3 Keras LayerNorms x 14 (2 means, a stop-gradient, a squared difference, rsqrt,
# scale and shift, and reshapes of gamma and beta), 6 projections x 2 (MatMul + BiasAdd: fused
# q/k/v, self output, cross query, cross output, FFN inner and outer), 2 attentions x 8 (2
# batched matmuls, the bias add, softmax as max/sub/exp/sum/div), a split, 2 key/value
# reshapes and 2 cache scatters, 4 head reshapes, 3 residual adds and the activation. The rest:
# the embedding (a gather with Keras' negative-index guard, the scale), the position row, the
# mask and scatter-index rows, the logits, and greedy's own log-softmax, bans, argmax and
# id-buffer write. The step before it (its own LayerNorm in 10 ops) was 70 + 34; a profile of the
# tutorial model's 40-token greedy decode counted ~2 more executed ops per step than with it
# (Grappler removes the rest), and the decoding benchmarks ran as fast. The first step (Keras
# Dense calls on 3-D inputs, a look-ahead mask rebuilt per step, one-hot cache rewrites) was
# ~1,000 ops for the tutorial's 4 layers. The budget leaves ~5% headroom, so that a real
# regression fails and a TensorFlow upgrade that adds an op here or there does not.
OPS_PER_LAYER = 87
OPS_FIXED = 42  # 41: 38, and the rows per sentence read from the shapes at each step
NORM_OPS = 14  # a pre-norm stack's final LayerNorm


@functools.cache
def step_ops(num_layers, norm_first=False) -> collections.Counter:
    """`while_body_ops` of `layered_model(num_layers, norm_first)`'s greedy decoding, traced once."""
    return while_body_ops(make_decode_fn(layered_model(num_layers, norm_first), max_new_tokens=8))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decode_step_stays_within_its_op_budget(norm_first):
    # Pre-norm adds one LayerNorm at the end of the stack.
    counts = {n: sum(step_ops(n, norm_first).values()) for n in (1, 2)}
    per_layer = counts[2] - counts[1]
    assert per_layer <= OPS_PER_LAYER, counts
    assert counts[1] - per_layer <= OPS_FIXED + NORM_OPS * norm_first, counts


def test_decode_step_avoids_ops_that_onednn_makes_slow_and_rewrites_no_whole_cache():
    ops = step_ops(2)
    # oneDNN rewrites BatchMatMulV2 and Softmax into primitives costing ~40 µs each at one-row
    # sizes (see `kv_cache.GraphLayout`).
    assert ops["BatchMatMulV2"] == ops["Softmax"] == 0
    # The cache slot is written in place, one update per key/value tensor; no mask is rebuilt
    # (MatrixBandPart) and no look-ahead mask is sliced from a fresh (len, len) table.
    assert ops["TensorStridedSliceUpdate"] == 2 * 2
    assert ops["MatrixBandPart"] == ops["Fill"] == 0


@functools.cache
def mixed_model(policy):
    config = get_preset("tiny").replace(
        num_layers=1, input_vocab_size=30, target_vocab_size=40, norm_first=True
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_config({**config.to_dict(), "dtype": policy})
    model.build()
    return model


@functools.cache
def mixed_decoded(policy, beam_size, how):
    """`mixed_model(policy)`'s decoding of SRC, 6 new tokens (every beam): `how` is
    "recompute", a step layout ("graph", "xla") or "jit" (XLA, its default layout). Traced once
    for each setting."""
    options = {"max_new_tokens": 6, "beam_size": beam_size, "return_all_beams": beam_size > 1}
    if how == "recompute":
        options["recompute"] = True
    elif how == "jit":
        options["jit_compile"] = True
    else:
        options["step_layout"] = how
    return make_decode_fn(mixed_model(policy), **options)(SRC)


# How far a step's log-probabilities may round from the full model's (`step`; measured here:
# up to 0.0025 in float16 and 0.028 in bfloat16, so a choice is clear when the top two are more
# than twice that apart) and a 6-token sum (`total`). The seeded bfloat16 model's greedy decoding
# of SRC has top-two margins of 0.008-0.06 at a few steps: one of them flipped an id on an
# AVX2-only CPU (1 for 16 at step 4), as it does here with oneDNN off and XLA limited to AVX2.
TOLERANCES = {
    "mixed_float16": {"step": 1e-2, "total": 2e-2},
    "mixed_bfloat16": {"step": 6e-2, "total": 1.2e-1},
}


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("how", ["recompute", "graph", "xla", "jit"])
def test_decoding_under_mixed_precision_scores_and_chooses_as_the_model(policy, beam_size, how):
    # The step's kernels must exist for half types too (BatchMatMulV3 has no float16 CPU one),
    # and every path, cached or not, graph or XLA, gives each hypothesis the score the full
    # model gives its tokens. Ids are compared only where rounding cannot flip them
    # (teacher_forcing.py): a near-tie may go either way on another CPU.
    model, out = mixed_model(policy), mixed_decoded(policy, beam_size, how)
    tolerance = TOLERANCES[policy]
    assert_scored_as_the_model(model, SRC, out, atol=tolerance["total"])
    if beam_size == 1:
        checked, near_ties = assert_greedy_choices_are_the_models(
            model, SRC, out, margin=tolerance["step"]
        )
        assert checked > near_ties, (checked, near_ties)  # most of the 18 choices are proven
