"""WordPiece vocabularies: the text normalisation that learning and tokenizing share, learning
a vocabulary with the steps of TF Text's ``bert_vocab_from_dataset`` (with a progress bar), and
writing it."""

from __future__ import annotations

import concurrent.futures
import functools
from pathlib import Path

import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner
from tqdm.auto import tqdm

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
    progress: bool = False,
    description: str = "vocabulary",
    sample_size: int | None = None,
) -> list[str]:
    """Learns a WordPiece vocabulary as ``bert_vocab_from_dataset`` does: the words of `texts`
    counted (TF Text's ``BasicTokenizer``, the tokenizer's word splitting), then WordPiece
    learnt from the counts.

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
        progress: a progress bar (tqdm) over the counted batches, then the learning step.
        description: what the bar says it builds (e.g. "source vocabulary").
        sample_size: about how many strings `texts` holds when it is a sample drawn as it is
            read: the bar then says it draws them, and counts its batches against it.

    Returns:
        The vocabulary, reserved tokens first.
    """
    batches = texts.batch(batch_size)
    # Graph code: AutoGraph would only re-read it (and tensorflow_text) when a map is traced.
    if lower_case:
        batches = batches.map(tf.autograph.experimental.do_not_convert(normalize))
    words = batches.map(
        tf.autograph.experimental.do_not_convert(
            bert_tokenizer.BasicTokenizer(**BERT_TOKENIZER_PARAMS).tokenize
        )
    )
    total = int(words.cardinality())
    counting = "counting words"
    if sample_size is not None:
        total = -(-sample_size // batch_size)
        counting = f"drawing about {sample_size:,} sentences, counting words"
    with tqdm(
        total=total + 1 if total >= 0 else None,
        desc=f"{description}: {counting}",
        unit="batch",
        disable=not progress,
    ) as bar:

        def counted():
            for batch in words.prefetch(tf.data.AUTOTUNE):
                yield batch
                bar.update()

        counts = learner.count_words(counted())
        if sample_size is not None:  # the sample's size was about `sample_size`: now it is known
            bar.total = bar.n + 1
        bar.set_description(f"{description}: learning WordPiece from {len(counts):,} words")
        learn = functools.partial(
            learner.learn, counts, vocab_size, list(reserved_tokens), **(learn_params or {})
        )
        vocab = _refreshing(bar, learn) if progress else learn()
        bar.update()
    return vocab


def _refreshing(bar, work):
    """Runs `work()` in a thread, redrawing `bar` every second so its clock shows it is alive
    (WordPiece learning is one call of minutes on ~80k pairs); returns what `work` returns."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(work)
        while True:
            try:
                return future.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                bar.refresh()


def write_vocab(vocab: list[str], path: str | Path) -> Path:
    """Writes a vocabulary file, one token per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(token + "\n" for token in vocab), encoding="utf-8")
    return path
