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

import functools
import tempfile
from pathlib import Path

import tensorflow as tf
import tensorflow_text as text

from tf_transformer.text.detokenize import attach_punctuation
from tf_transformer.text.special_tokens import (  # noqa: F401  (part of this module's API)
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
)
from tf_transformer.text.truecase import (
    FirstWordTruecaser,
    capitalize_first_letter,
    learn_first_words,
)
from tf_transformer.text.vocab import (
    BERT_TOKENIZER_PARAMS,
    learn_vocab,
    normalize,
    write_vocab,
)

_STRINGS = tf.TensorSpec(shape=[None], dtype=tf.string)
_DENSE_IDS = (
    tf.TensorSpec(shape=[None, None], dtype=tf.int64),
    tf.TensorSpec(shape=[None, None], dtype=tf.int32),
)
_RAGGED_IDS = tf.RaggedTensorSpec(shape=[None, None], dtype=tf.int64, ragged_rank=1)


class LanguageTokenizer(tf.Module):
    """A WordPiece tokenizer for one language, exportable with ``tf.saved_model.save``.

    Ids: ``[PAD]=0``, ``[UNK]=1``, ``[START]=2``, ``[END]=3``, then the learnt wordpieces.

    Args:
        vocab_path: a vocabulary file, one token per line, starting with the reserved tokens.
        reserved_tokens: the reserved tokens at the head of the vocabulary.
        lower_case: lower-case text before tokenizing (the vocabulary must have been learnt the
            same way); saved as the boolean variable ``lower_case``.
        first_words: truecase the sentence-initial word (`tf_transformer.text.truecase`):
            `tokenize` lower-cases a first word in this list, `detokenize` capitalises the
            first letter. None (the default): neither.

    Example:
        >>> tok = LanguageTokenizer("en_vocab.txt")
        >>> ids = tok.tokenize(tf.constant(["Hello, world !"]))  # [[2, ..., 3]]
        >>> tok.detokenize(ids)  # [b"Hello, world!"]
    """

    def __init__(
        self,
        vocab_path: str | Path,
        reserved_tokens=RESERVED_TOKENS,
        *,
        lower_case: bool = False,
        first_words: list[str] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.truecaser = None if first_words is None else FirstWordTruecaser(first_words)
        vocab_path = str(vocab_path)
        self.tokenizer = text.BertTokenizer(vocab_path, **BERT_TOKENIZER_PARAMS)
        self._reserved_tokens = list(reserved_tokens)
        self._vocab_path = tf.saved_model.Asset(vocab_path)
        vocab = Path(vocab_path).read_text(encoding="utf-8").splitlines()
        if vocab[: len(self._reserved_tokens)] != self._reserved_tokens:
            raise ValueError(f"{vocab_path} does not start with {self._reserved_tokens}")
        self.vocab = tf.Variable(vocab, trainable=False)
        self.lower_case = tf.Variable(bool(lower_case), trainable=False, name="lower_case")

    def trace_for_export(self) -> None:
        """Traces every accepted input form of `detokenize` and `lookup`.

        ``tf.saved_model.save`` keeps only the traces a function without an input signature
        already has; `Tokenizers.save` calls this so the SavedModel accepts dense int64/int32
        and ragged int64 ids. Call it before saving another module that holds this tokenizer.
        """
        for spec in (*_DENSE_IDS, _RAGGED_IDS):
            self.detokenize.get_concrete_function(spec)
        for spec in (_DENSE_IDS[0], _RAGGED_IDS):
            self.lookup.get_concrete_function(spec)

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Strings `(batch,)` → ragged int64 ids `(batch, None)` with [START] … [END]."""
        if self.truecaser is not None:
            strings = self.truecaser.lower_first_word(strings)
        ids = self.tokenizer.tokenize(normalize(strings, self.lower_case))  # (batch, words, pieces)
        ids = ids.merge_dims(-2, -1)  # (batch, tokens)
        batch = ids.bounding_shape()[0]
        starts = tf.fill([batch, 1], tf.constant(START_ID, tf.int64))
        ends = tf.fill([batch, 1], tf.constant(END_ID, tf.int64))
        return tf.concat([starts, ids, ends], axis=1)

    @tf.function(autograph=False)
    def detokenize(self, ids) -> tf.Tensor:
        """Ids `(batch, None)`, ragged or dense (PAD=0), int64 or int32 → strings `(batch,)`.

        [PAD], [START] and [END] are dropped, and so is anything after the first [END] (batched
        decoders keep emitting after it); [UNK] stays visible. Wordpieces are joined into words,
        words by single spaces, and then punctuation and clitics are re-attached
        (`attach_punctuation`: "don ' t go ." → "don't go."). A truecasing tokenizer
        (`first_words`) then capitalises the first letter.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int64)  # (batch, len)
        after_end = tf.cumsum(tf.cast(ids == END_ID, tf.int32), axis=-1, exclusive=True) > 0
        keep = (ids != PAD_ID) & (ids != START_ID) & (ids != END_ID) & ~after_end
        kept = tf.ragged.boolean_mask(ids, keep)
        words = self.tokenizer.detokenize(kept)  # (batch, words)
        text = attach_punctuation(tf.strings.reduce_join(words, separator=" ", axis=-1))
        return text if self.truecaser is None else capitalize_first_letter(text)

    @tf.function(autograph=False)
    def lookup(self, ids) -> tf.RaggedTensor:
        """Int64 ids `(batch, None)`, ragged or dense → ragged wordpiece strings `(batch, None)`."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        return tf.gather(self.vocab, tf.cast(ids, tf.int64))

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self) -> tf.Tensor:
        """The vocabulary size, reserved tokens included (int32 scalar)."""
        return tf.shape(self.vocab)[0]

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_path(self) -> tf.Tensor:
        """The vocabulary file (an asset: inside the SavedModel once saved)."""
        return self._vocab_path

    @tf.function(input_signature=[], autograph=False)
    def get_reserved_tokens(self) -> tf.Tensor:
        """The reserved tokens, in id order."""
        return tf.constant(self._reserved_tokens)


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

        self.source.trace_for_export()
        self.target.trace_for_export()
        write_directory(path, lambda tmp: tf.saved_model.save(self, tmp), replace=True)


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

    Returns:
        The tokenizers, ready to use or to `Tokenizers.save`.
    """
    vocab_dir = Path(vocab_dir or tempfile.mkdtemp(prefix="tf_transformer_vocab_"))
    learn = functools.partial(
        learn_vocab,
        vocab_size=vocab_size,
        reserved_tokens=reserved_tokens,
        batch_size=batch_size,
        learn_params=learn_params,
        progress=progress,
    )
    lower = (lower_case or lower_case_source, lower_case)  # (source, target)
    first_words = None
    if truecase_target and not lower_case:
        first_words = learn_first_words(
            target.decode("utf-8") for _, target in pairs.as_numpy_iterator()
        )
    sources = pairs.map(lambda source, target: normalize(source, lower[0]))
    targets = pairs.map(lambda source, target: target)
    if first_words:  # each side counted as its tokenizer reads it: truecased, then normalised
        targets = targets.map(FirstWordTruecaser(first_words).lower_first_word)
    texts = [sources, targets.map(lambda target: normalize(target, lower[1]))]
    if shared_vocab:  # word counts of both languages, one vocabulary for both roles
        vocabs = [learn(texts[0].concatenate(texts[1]), description="shared vocabulary")] * 2
    else:
        vocabs = [
            learn(side, description=f"{role} vocabulary ({lang})")
            for side, role, lang in zip(texts, ("source", "target"), (source_lang, target_lang))
        ]
    paths = {
        role: write_vocab(vocab, vocab_dir / f"{role}.{lang}.vocab")
        for role, lang, vocab in zip(("source", "target"), (source_lang, target_lang), vocabs)
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
