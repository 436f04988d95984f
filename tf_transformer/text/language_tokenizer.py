"""`LanguageTokenizer`: the WordPiece tokenizer of one language, as a `tf.Module` that saves
with its vocabulary (see `tf_transformer.text.tokenizers` for the pair, and the ops it uses)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
import tensorflow_text as text

from tf_transformer.errors import InvalidValueError
from tf_transformer.text.detokenize import attach_punctuation
from tf_transformer.text.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from tf_transformer.text.truecase import FirstWordTruecaser, capitalize_first_letter
from tf_transformer.text.vocab import BERT_TOKENIZER_PARAMS, normalize

_STRINGS = tf.TensorSpec(shape=[None], dtype=tf.string)
# Named as the functions' argument, as the signatures ``tf.saved_model.save`` traces again are.
_DENSE_IDS = (
    tf.TensorSpec(shape=[None, None], dtype=tf.int64, name="ids"),
    tf.TensorSpec(shape=[None, None], dtype=tf.int32, name="ids"),
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
            raise InvalidValueError(f"{vocab_path} does not start with {self._reserved_tokens}")
        self.vocab = tf.Variable(vocab, trainable=False)
        self.lower_case = tf.Variable(bool(lower_case), trainable=False, name="lower_case")

    def trace_for_export(self) -> None:
        """Traces every accepted input form of `detokenize` and `lookup`.

        ``tf.saved_model.save`` keeps only the traces a function without an input signature
        already has; `Tokenizers.save` calls this so the SavedModel accepts dense int64/int32
        and ragged int64 ids, under the save's context so that the save reuses these traces.
        Call it before saving another module that holds this tokenizer.
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
        # One trace of the text work, shared by every input form (a SavedModel stores it once).
        return self._detokenize_dense(tf.cast(ids, tf.int64))

    @tf.function(input_signature=[_DENSE_IDS[0]], autograph=False)
    def _detokenize_dense(self, ids: tf.Tensor) -> tf.Tensor:
        """`detokenize` of dense int64 ids `(batch, len)`."""
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
