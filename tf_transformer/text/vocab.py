"""WordPiece vocabularies: the text normalisation that learning and tokenizing share, learning
a vocabulary with the steps of TF Text's ``bert_vocab_from_dataset`` (with a progress bar), and
writing it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import multiprocessing
from pathlib import Path

import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner
from tqdm.auto import tqdm

from tf_transformer.text.special_tokens import RESERVED_TOKENS

# Arguments shared by vocabulary learning and the tokenizer, so both split words the same way.
BERT_TOKENIZER_PARAMS = {"lower_case": False, "normalization_form": "NFC"}
# From this many distinct words on, `learn_vocabs` learns a vocabulary in a second process
# (~25 s of learning against ~5 s to start a process that imports TensorFlow).
PARALLEL_WORDS = 20_000


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
            word counts, binary-searching the frequency threshold that hits `vocab_size`), or
            ``{"max_input_tokens": N}``: only the N most frequent words.
        lower_case: lower-case the text first (as a tokenizer with ``lower_case=True`` does);
            else the vocabulary keeps case ("Tom" and "tom" are different tokens).
        progress: a progress bar (tqdm) over the counted batches, then the learning step.
        description: what the bar says it builds (e.g. "source vocabulary").
        sample_size: about how many strings `texts` holds when it is a sample drawn as it is
            read: the bar then says it draws them, and counts its batches against it.

    Returns:
        The vocabulary, reserved tokens first.
    """
    return learn_vocabs(
        [(texts, description)],
        vocab_size,
        reserved_tokens=reserved_tokens,
        batch_size=batch_size,
        learn_params=learn_params,
        lower_case=lower_case,
        progress=progress,
        sample_size=sample_size,
    )[0]


def learn_vocabs(
    texts: list[tuple[tf.data.Dataset, str]],
    vocab_size: int = 8000,
    *,
    reserved_tokens=RESERVED_TOKENS,
    batch_size: int = 1000,
    learn_params: dict | None = None,
    lower_case: bool = False,
    progress: bool = False,
    sample_size: int | None = None,
) -> list[list[str]]:
    """`learn_vocab` for each `(texts, description)`, in order. WordPiece learning is
    single-threaded Python (~100 s for 50,000 words), so a vocabulary of `PARALLEL_WORDS` words
    or more, but the last, is learnt in a second process while the next one is counted and
    learnt here."""
    params = {"vocab_size": vocab_size, "reserved_tokens": list(reserved_tokens)}
    learn = functools.partial(learner.learn, **params, **(learn_params or {}))
    vocabs, waiting = [], []
    with contextlib.ExitStack() as stack:
        for index, (text, description) in enumerate(texts):
            bar = stack.enter_context(_bar(text, description, progress, batch_size, sample_size))
            counts = _counted_words(text, bar, batch_size, lower_case, sample_size)
            learning = f"{description}: learning WordPiece from {len(counts):,} words"
            bar.set_description(learning)
            if len(counts) >= PARALLEL_WORDS and index < len(texts) - 1:
                context = multiprocessing.get_context("spawn")  # TensorFlow's threads: no fork
                pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=context)
                stack.enter_context(pool)
                bar.set_description(f"{learning} (in a second process)")
                waiting.append((len(vocabs), bar, pool.submit(learn, counts)))
                vocabs.append(None)
                continue
            vocabs.append(_refreshing(bar, functools.partial(learn, counts), progress))
            bar.update()
        for index, bar, future in waiting:
            vocabs[index] = _refreshing(bar, future.result, progress)
            bar.update()
    return vocabs


def _bar(text, description, progress, batch_size, sample_size):
    """The progress bar of one vocabulary: its batches counted, then one step for learning."""
    total, counting = int(text.cardinality()), "counting words"
    if total >= 0:
        total = -(-total // batch_size)
    if sample_size is not None:
        total = -(-sample_size // batch_size)
        counting = f"drawing about {sample_size:,} sentences, counting words"
    return tqdm(
        total=total + 1 if total >= 0 else None,
        desc=f"{description}: {counting}",
        unit="batch",
        disable=not progress,
    )


def _counted_words(texts, bar, batch_size, lower_case, sample_size):
    """`(word, count)` of `texts` as the tokenizer splits them, `bar` advanced per batch."""
    batches = texts.batch(batch_size)
    # Graph code: AutoGraph would only re-read it (and tensorflow_text) when a map is traced.
    if lower_case:
        batches = batches.map(tf.autograph.experimental.do_not_convert(normalize))
    words = batches.map(
        tf.autograph.experimental.do_not_convert(
            bert_tokenizer.BasicTokenizer(**BERT_TOKENIZER_PARAMS).tokenize
        )
    )

    def counted():
        for batch in words.prefetch(tf.data.AUTOTUNE):
            yield batch
            bar.update()

    counts = learner.count_words(counted())
    if sample_size is not None:  # the sample's size was about `sample_size`: now it is known
        bar.total = bar.n + 1
    return counts


def _refreshing(bar, work, progress: bool = True):
    """Runs `work()` in a thread, redrawing `bar` every second so its clock shows it is alive
    (WordPiece learning is one call of minutes on ~80k pairs); returns what `work` returns."""
    if not progress:
        return work()
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
