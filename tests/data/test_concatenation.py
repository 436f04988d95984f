"""Concatenation augmentation (`TrainConfig.concat_fraction`): which pairs are joined, how, and
that the training batches carry them."""

import pytest
import tensorflow as tf

from tf_transformer.cli import build_parser
from tf_transformer.commands.train import configs_from_args
from tf_transformer.config import TrainConfig
from tf_transformer.data.concatenation import add_concatenations
from tf_transformer.text.tokenizers import build_tokenizers
from tf_transformer.training.start.inputs import epoch_batches

pytestmark = pytest.mark.cost(30)  # seconds in make test (measured)

SOURCES = [f"fonte {i}." for i in range(40)]
TARGETS = [f"target {i}." for i in range(40)]


@pytest.fixture(scope="module")
def corpus_tokenizers():
    return build_tokenizers(_pairs(), vocab_size=200, learn_params={"lower_thresh": 1})


def _pairs() -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))


def _listed(dataset: tf.data.Dataset) -> list[tuple[str, str]]:
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in dataset.as_numpy_iterator()]


def test_fraction_zero_is_the_corpus():
    assert _listed(add_concatenations(_pairs(), 0.0)) == list(zip(SOURCES, TARGETS))


def test_fraction_one_joins_every_draw_source_with_source_and_target_with_target():
    listed = _listed(add_concatenations(_pairs(), 1.0, seed=3))
    assert listed[:40] == list(zip(SOURCES, TARGETS))  # the corpus first, unchanged
    joined = listed[40:]
    assert len(joined) == 40
    target_of = dict(zip(SOURCES, TARGETS))
    for source, target in joined:
        one, two = source.split(". ")
        assert target == f"{target_of[one + '.']} {target_of[two]}"
    firsts = sorted(source.split(". ")[0] + "." for source, _ in joined)
    assert firsts == sorted(SOURCES)  # each corpus pair leads one join (a shuffle)
    assert len({source for source, _ in joined}) > 30  # two different shuffles


def test_a_fraction_keeps_about_that_share_the_same_for_the_same_seed():
    counts = []
    for seed in (0, 1, 2, 3):
        listed = _listed(add_concatenations(_pairs(), 0.5, seed=seed))
        assert listed == _listed(add_concatenations(_pairs(), 0.5, seed=seed))
        counts.append(len(listed) - 40)
    assert all(8 <= count <= 32 for count in counts)  # 20 expected of 40 draws
    assert _listed(add_concatenations(_pairs(), 0.5, seed=0)) != _listed(
        add_concatenations(_pairs(), 0.5, seed=1)
    )


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_fraction_outside_zero_one_is_refused(fraction):
    with pytest.raises(ValueError, match="concat_fraction must be in"):
        add_concatenations(_pairs(), fraction)
    with pytest.raises(ValueError, match="concat_fraction must be in"):
        TrainConfig(concat_fraction=fraction)


def test_epoch_batches_carry_the_joined_pairs(corpus_tokenizers):
    config = TrainConfig(max_tokens=32, token_budget=256, seed=0)
    examples, tokens = [], []
    for fraction in (0.0, 1.0):
        batches = epoch_batches(
            _pairs(), corpus_tokenizers, config.replace(concat_fraction=fraction)
        )
        real = [int(tf.math.count_nonzero(tgt_out)) for _, tgt_out in batches(0)]
        sizes = [int(tgt_out.shape[0]) for _, tgt_out in batches(0)]
        examples.append(sum(sizes))
        tokens.append(sum(real))
    assert examples == [40, 80]
    assert tokens[1] > 2.5 * tokens[0]  # each join holds two targets (one [END] each side)
    given = ["train", "--preset", "tiny", "--concat-fraction", "0.25"]
    _, train_config = configs_from_args(build_parser().parse_args(given))
    assert train_config.concat_fraction == 0.25
    assert TrainConfig().concat_fraction == 0.0
