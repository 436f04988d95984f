"""Sample-corpus sentences as people write them, for the tests of cased tokenizers and exports."""

from __future__ import annotations

import re

import tensorflow as tf

from tf_transformer.text.detokenize import attach_punctuation


def written(sentences: list[str]) -> list[str]:
    """Sample sentences as people write them: "o carro do menino é novo ." -> "O carro … novo.".

    One `attach_punctuation` call for the whole list (a call per sentence costs ~1 ms each)."""
    # Every punctuation mark spaced apart ("'s" -> "' s"), as the sample corpus writes most.
    spaced = [" ".join(re.sub(r"([^\w\s])", r" \1 ", s).split()) for s in sentences]
    attached = attach_punctuation(tf.constant(spaced)).numpy()
    capitalised = []
    for sentence in attached:
        sentence = re.sub(r"\bi\b", "I", sentence.decode("utf-8"))
        capitalised.append(sentence[:1].upper() + sentence[1:])
    return capitalised


def written_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`written` on both sides of each (source, target) pair."""
    sources = written([source for source, _ in pairs])
    targets = written([target for _, target in pairs])
    return list(zip(sources, targets, strict=True))
