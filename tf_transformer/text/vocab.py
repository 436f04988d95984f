"""WordPiece vocabularies: the text normalisation that learning and tokenizing share, learning
a vocabulary with TF Text's ``bert_vocab_from_dataset``, and writing it."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bert_vocab

from tf_transformer.text.special_tokens import RESERVED_TOKENS

# Arguments shared by vocabulary learning and the tokenizer, so both split words the same way.
BERT_TOKENIZER_PARAMS = {"lower_case": False, "normalization_form": "NFC"}


def normalize(strings: tf.Tensor, lower_case: bool | tf.Tensor = True) -> tf.Tensor:
    """Lower-cases UTF-8 strings (keeping accents) when `lower_case`; else returns them as is.

    The tokenizer adds NFC normalisation. `lower_case` may be a boolean tensor (the saved flag):
    then the choice is made in the graph, and both branches stay in it.
    """
    if isinstance(lower_case, bool):
        return tf.strings.lower(strings, encoding="utf-8") if lower_case else strings
    return tf.cond(lower_case, lambda: tf.strings.lower(strings, encoding="utf-8"), lambda: strings)


def learn_vocab(
    texts: tf.data.Dataset,
    vocab_size: int = 8000,
    *,
    reserved_tokens=RESERVED_TOKENS,
    batch_size: int = 1000,
    learn_params: dict | None = None,
    lower_case: bool = False,
) -> list[str]:
    """Learns a WordPiece vocabulary with ``bert_vocab_from_dataset``.

    Args:
        texts: a dataset of scalar strings.
        vocab_size: the target size (an upper bound; small corpora give fewer tokens).
        reserved_tokens: tokens put first, in this order.
        batch_size: strings per batch while counting words.
        learn_params: extra arguments of ``wordpiece_tokenizer_learner_lib.learn``, e.g.
            ``{"num_iterations": 1}`` to learn faster (each iteration is one full pass over the
            word counts, binary-searching the frequency threshold that hits `vocab_size`).
        lower_case: lower-case the text first (as a tokenizer with ``lower_case=True`` does);
            else the vocabulary keeps case ("Tom" and "tom" are different tokens).

    Returns:
        The vocabulary, reserved tokens first.
    """
    batches = texts.batch(batch_size)
    if lower_case:
        batches = batches.map(normalize)
    batches = batches.prefetch(tf.data.AUTOTUNE)
    return bert_vocab.bert_vocab_from_dataset(
        batches,
        vocab_size=vocab_size,
        reserved_tokens=list(reserved_tokens),
        bert_tokenizer_params=BERT_TOKENIZER_PARAMS,
        learn_params=learn_params or {},
    )


def write_vocab(vocab: list[str], path: str | Path) -> Path:
    """Writes a vocabulary file, one token per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(token + "\n" for token in vocab), encoding="utf-8")
    return path
