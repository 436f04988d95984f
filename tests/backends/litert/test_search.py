"""The LiteRT runtime's numpy searches choose as the TensorFlow ones on scripted logits: random
bigram tables (the next token's logits depend on the current token and the step), where beams
finish at different steps and the length penalty decides."""

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.backends.litert.search import beam_search, greedy, top_k
from tf_transformer.inference.decoding.beam import beam_search as tf_beam_search
from tf_transformer.inference.decoding.greedy import greedy_decode
from tf_transformer.text.special_tokens import END_ID

VOCAB, STEPS, BATCH = 12, 7, 3


def scripted(seed):
    """`(tables, tf logits_fn, numpy run_step)` over the same `(STEPS, VOCAB, VOCAB)` logits."""
    rng = np.random.default_rng(seed)
    tables = rng.normal(size=(STEPS, VOCAB, VOCAB)).astype(np.float32) * 2
    tables[:, :, END_ID] += np.linspace(-1, 2, STEPS)[:, None].astype(np.float32)  # END later
    constant = tf.constant(tables)

    def logits_fn(ids, step, cache):
        return tf.gather(tf.gather(constant, step), ids), cache

    def run_step(ids, step, parents=None):
        return tables[step][ids].copy()

    return logits_fn, run_step


def padded(a, width):
    return np.pad(a, [(0, 0), (0, width - a.shape[1])])


@pytest.mark.parametrize("seed", range(4))
def test_greedy_chooses_as_tensorflow(seed):
    logits_fn, run_step = scripted(seed)
    expected = greedy_decode(logits_fn, (), BATCH, STEPS, min_length=2).ids.numpy()
    ours = greedy(run_step, BATCH, STEPS, min_length=2)
    assert padded(ours, expected.shape[1]).tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_beam_search_chooses_as_tensorflow(seed, penalty):
    logits_fn, run_step = scripted(seed)
    expected = tf_beam_search(logits_fn, (), BATCH, 3, STEPS, penalty, min_length=1).ids.numpy()
    ours = beam_search(run_step, BATCH, 3, STEPS, penalty, min_length=1)
    assert padded(ours, expected.shape[1]).tolist() == expected.tolist()


@pytest.mark.parametrize("k", [1, 4])
def test_top_k_on_long_rows_breaks_ties_as_tensorflow(k):
    # Few distinct values: ties everywhere, -inf (a banned token) among them; 3-D as beams.
    x = np.random.default_rng(k).integers(0, 4, size=(2, 3, 40)).astype(np.float32)
    x[0, 0, :30] = -np.inf
    expected = tf.math.top_k(x, k).indices.numpy()
    assert top_k(x, k).tolist() == expected.tolist()
