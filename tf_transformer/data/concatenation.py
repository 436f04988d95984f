"""Concatenation augmentation: training pairs joined two by two ("Eu vi. Ele correu." →
"I saw. He ran."), added to the training pairs of each epoch.

Most training sentences are single sentences, so a model learns to stop after one and drops
the second sentence of a two-sentence input. Joining random pairs (Nguyen et al. 2021, "Data
Augmentation by Concatenation for Low-Resource Translation: A Mystery and a Solution") gives it
longer inputs, sentence boundaries inside them, and words far from the sentence start.
"""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.errors import InvalidValueError


def add_concatenations(
    pairs: tf.data.Dataset,
    fraction: float,
    *,
    seed: int = 0,
    shuffle_buffer: int = 20000,
) -> tf.data.Dataset:
    """`pairs` followed by about `fraction` × len(pairs) joined pairs.

    Each joined pair is two pairs of the corpus, drawn in two independent shuffles (seeds
    `seed` and `seed + 1`), their sources and their targets joined by a space; each of the
    len(pairs) draws is kept with probability `fraction` (a stateless draw of `seed` and its
    index, so the same seed gives the same pairs).

    Args:
        pairs: scalar `tf.string` `(source, target)` pairs.
        fraction: the expected share of joined pairs, in [0, 1]; 0 returns `pairs`.
        seed: the seed of the shuffles and of the draws (vary it per epoch).
        shuffle_buffer: the shuffle buffer size (the corpus size shuffles fully).

    Raises:
        ValueError: `fraction` is outside [0, 1].
    """
    if not 0.0 <= fraction <= 1.0:
        raise InvalidValueError(f"concat_fraction must be in [0, 1], got {fraction}.")
    if fraction == 0.0:
        return pairs
    first = pairs.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=False)
    second = pairs.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=False)

    def kept(index):
        draw = tf.random.stateless_uniform([], seed=tf.stack([tf.cast(seed, tf.int64), index]))
        return draw < fraction

    def join(one, two):
        return (
            tf.strings.join([one[0], two[0]], separator=" "),
            tf.strings.join([one[1], two[1]], separator=" "),
        )

    draws = tf.data.Dataset.zip(first, second).enumerate()
    joined = draws.filter(tf.autograph.experimental.do_not_convert(lambda index, pair: kept(index)))
    joined = joined.map(tf.autograph.experimental.do_not_convert(lambda index, pair: join(*pair)))
    return pairs.concatenate(joined)
