"""WordPiece tokenizers of a language pair: build the vocabularies, tokenize/detokenize, save.

The saved module needs only ``tensorflow`` and ``tensorflow_text`` to load, and uses only
long-standing ops that TF Serving's bundled TF Text has (StringLower, StaticRegexReplace,
NormalizeUTF8, RegexSplitWithOffsets, WordpieceTokenizeWithOffsets, lookup tables).

Case: new tokenizers keep it (``lower_case=False``), so translations come out cased. The flag is
saved with each tokenizer (a ``lower_case`` variable); tokenizers saved before it existed
lower-case, and `load_tokenizers` gives them ``lower_case`` = True. With ``lower_case_source``
only the source side lower-cases: the translator ignores the case of its input, writes cased text.

Normalisation differs from the TF tutorial's ``BertTokenizer(lower_case=True)`` on purpose: that
also strips accents (``comédia`` → ``comedia``) through ICU case folding and NFD. Here text is
NFC-normalised and, with ``lower_case=True``, lower-cased with the core
``tf.strings.lower(encoding="utf-8")``, so accents survive the round trip.

Detokenization joins words by spaces and re-attaches punctuation and clitics the way normal text
writes them ("new.", "don't", "(yes)"; see `tf_transformer.text.detokenize`).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops that load_tokenizers needs)

from tf_transformer.text.language_tokenizer import LanguageTokenizer
from tf_transformer.text.special_tokens import (  # noqa: F401  (part of this module's API)
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
)
from tf_transformer.text.truecase import FirstWordTruecaser, learn_first_words
from tf_transformer.text.vocab import (
    learn_vocab,
    learn_vocabs,
    normalize,
    write_vocab,
)


class Tokenizers(tf.Module):
    """The pair of tokenizers a translation model needs: ``.source`` and ``.target``.

    The roles name the tokenizers; the languages are data (`languages`), so any pair works.
    Tokenizers saved before the roles existed (with ``.pt`` and ``.en``) still load through
    `load_tokenizers`.

    Args:
        source_vocab_path: the source-language vocabulary file.
        target_vocab_path: the target-language vocabulary file.
        reserved_tokens: the reserved tokens at the head of both vocabularies.
        source_lang, target_lang: language codes, recorded in the SavedModel.
        lower_case: both tokenizers lower-case their input (as their vocabularies were learnt).
        lower_case_source: the source tokenizer lower-cases its input, whatever `lower_case`.
        target_first_words: the target tokenizer truecases the first word (`LanguageTokenizer`'s
            `first_words`); None: it does not.
    """

    def __init__(
        self,
        source_vocab_path,
        target_vocab_path,
        reserved_tokens=RESERVED_TOKENS,
        *,
        source_lang: str = "pt",
        target_lang: str = "en",
        lower_case: bool = False,
        lower_case_source: bool = False,
        target_first_words: list[str] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.source = LanguageTokenizer(
            source_vocab_path, reserved_tokens, lower_case=lower_case or lower_case_source
        )
        self.target = LanguageTokenizer(
            target_vocab_path,
            reserved_tokens,
            lower_case=lower_case,
            first_words=target_first_words,
        )
        self.languages = tf.Variable([source_lang, target_lang], trainable=False, name="languages")

    def save(self, path: str | Path) -> None:
        """Writes a SavedModel that `load_tokenizers` (or plain ``tf.saved_model.load``) reads,
        atomically: a failed write (`atomic_files.WriteError`) leaves what `path` held."""
        from tf_transformer.atomic_files import write_directory

        def save(tmp: str) -> None:
            options = tf.saved_model.SaveOptions()
            # ``tf.saved_model.save`` traces every recorded input form again under its save
            # context (part of the trace cache's key): tracing them under that context here
            # records the forms and gives the save traces it reuses: a save took ~1.0 s instead of
            # ~1.6 s (3,000 pairs, 2,000-token vocabularies).
            with _save_context(options):
                self.source.trace_for_export()
                self.target.trace_for_export()
            tf.saved_model.save(self, tmp, options=options)

        write_directory(path, save, replace=True)


def _save_context(options: tf.saved_model.SaveOptions):
    """TensorFlow's save context (not public API): nothing when this TensorFlow lacks it."""
    try:
        from tensorflow.python.saved_model.save_context import save_context
    except ImportError:
        return contextlib.nullcontext()
    return save_context(options)


def load_tokenizers(path: str | Path):
    """Loads tokenizers saved by `Tokenizers.save`; only ``tensorflow_text`` must be imported.

    Returns:
        The restored module, with ``.source`` and ``.target`` offering the same methods (for
        tokenizers saved with ``.pt`` and ``.en``, those become ``.source`` and ``.target``),
        each with its boolean ``lower_case`` (True for tokenizers saved before the flag: they
        all lower-cased, and their saved functions still do).
    """
    tokenizers = tf.saved_model.load(str(path))
    if not hasattr(tokenizers, "source"):  # saved before the roles: the pt->en pair
        tokenizers.source, tokenizers.target = tokenizers.pt, tokenizers.en
        tokenizers.languages = tf.constant(["pt", "en"])
    for tokenizer in (tokenizers.source, tokenizers.target):
        if not hasattr(tokenizer, "lower_case"):  # saved before the flag
            tokenizer.lower_case = tf.Variable(True, trainable=False, name="lower_case")
    return tokenizers


def build_tokenizers(
    pairs: tf.data.Dataset,
    vocab_size: int = 8000,
    *,
    source_lang: str = "pt",
    target_lang: str = "en",
    vocab_dir: str | Path | None = None,
    reserved_tokens=RESERVED_TOKENS,
    batch_size: int = 1000,
    learn_params: dict | None = None,
    lower_case: bool = False,
    lower_case_source: bool = False,
    shared_vocab: bool = False,
    truecase_target: bool = False,
    progress: bool = False,
    sample_size: int | None = None,
) -> Tokenizers:
    """Learns source and target WordPiece vocabularies from ``(source, target)`` pairs.

    Args:
        pairs: a dataset of scalar string ``(source, target)`` pairs (e.g. from `load_dataset`).
        vocab_size: the target size of each vocabulary (with `shared_vocab`, of the one
            vocabulary both languages share: each gets a part of it, so raise it to keep as
            many tokens per language).
        source_lang, target_lang: the language codes (recorded; they name the vocabulary files).
        vocab_dir: where ``source.<lang>.vocab`` and ``target.<lang>.vocab`` are written
            (default: a new temporary directory).
        reserved_tokens: tokens put first in both vocabularies.
        batch_size: strings per batch while counting words.
        learn_params: extra arguments of the WordPiece learner (see `learn_vocab`).
        lower_case: lower-case everything (vocabularies and input); the default keeps case,
            so translations come out cased.
        lower_case_source: lower-case the source side only (its vocabulary and input); the
            target keeps case, so the model reads any case and writes cased text.
        shared_vocab: learn one vocabulary from the source and target text together and give
            it to both tokenizers (same ids for the same token on both sides, as tied
            embeddings need); it is still written as both vocabulary files. Each side's text
            is counted as its tokenizer reads it (with `lower_case_source`: the source
            lower-cased, the target cased).
        truecase_target: lower-case the target's sentence-initial words that are mostly
            written lower-case inside sentences (`tf_transformer.text.truecase`; learnt from
            the targets here, ignored with `lower_case`); translations get their first letter
            capitalised.
        progress: progress bars (tqdm) while the words are counted and WordPiece learnt.
        sample_size: about how many pairs `pairs` holds, when it is a sample drawn as it is
            read (`Mix.sample`): the bars then show the drawing against it.

    Returns:
        The tokenizers, ready to use or to `Tokenizers.save`.
    """
    vocab_dir = Path(vocab_dir or tempfile.mkdtemp(prefix="tf_transformer_vocab_"))
    roles = [("source", source_lang), ("target", target_lang)]
    learning = {"reserved_tokens": reserved_tokens, "batch_size": batch_size}
    learning.update(learn_params=learn_params, progress=progress)
    lower = (lower_case or lower_case_source, lower_case)  # (source, target)
    first_words = None
    if truecase_target and not lower_case:
        first_words = learn_first_words(
            target.decode("utf-8") for _, target in pairs.as_numpy_iterator()
        )
    # Graph code without Python control flow on tensors: AutoGraph would only re-read it.
    graph = tf.autograph.experimental.do_not_convert
    sources = pairs.map(graph(lambda source, target: normalize(source, lower[0])))
    targets = pairs.map(graph(lambda source, target: target))
    if first_words:  # each side counted as its tokenizer reads it: truecased, then normalised
        targets = targets.map(graph(FirstWordTruecaser(first_words).lower_first_word))
    texts = [sources, targets.map(graph(lambda target: normalize(target, lower[1])))]
    if shared_vocab:  # word counts of both languages, one vocabulary for both roles
        both = None if sample_size is None else 2 * sample_size
        both_texts = texts[0].concatenate(texts[1])
        shared = learn_vocab(
            both_texts, vocab_size, description="shared vocabulary", sample_size=both, **learning
        )
        vocabs = [shared] * 2
    else:  # a large source vocabulary is learnt in a second process while the target's is here
        descriptions = [f"{role} vocabulary ({lang})" for role, lang in roles]
        vocabs = learn_vocabs(
            list(zip(texts, descriptions)), vocab_size, sample_size=sample_size, **learning
        )
    paths = {
        role: write_vocab(vocab, vocab_dir / f"{role}.{lang}.vocab")
        for (role, lang), vocab in zip(roles, vocabs)
    }
    return Tokenizers(
        paths["source"],
        paths["target"],
        reserved_tokens,
        source_lang=source_lang,
        target_lang=target_lang,
        lower_case=lower_case,
        lower_case_source=lower_case_source,
        target_first_words=first_words,
    )
