"""The text-to-text Translator: source sentences in, target sentences (plus ids, scores) out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.text.special_tokens import END_ID, START_ID

STRINGS = tf.TensorSpec([None], tf.string)


def validate_utf8(sentences: Any) -> tf.Tensor:
    """Python strings, bytes or an eager string tensor -> `tf.string` `(batch,)`.

    Raises:
      ValueError: naming the first sentence that is not valid UTF-8 (bytes that do not decode,
        or a `str` holding lone surrogates, e.g. from `errors="surrogateescape"`).
    """
    if isinstance(sentences, (str, bytes)):
        sentences = [sentences]
    if tf.is_tensor(sentences):
        sentences = sentences.numpy().reshape(-1).tolist()
    encoded = []
    for index, sentence in enumerate(sentences):
        try:
            if isinstance(sentence, bytes):
                sentence.decode("utf-8")
                encoded.append(sentence)
            else:
                encoded.append(str(sentence).encode("utf-8"))
        except UnicodeError as error:
            raise InvalidValueError(f"Sentence {index} is not valid UTF-8: {error}.") from None
    return tf.constant(encoded, tf.string, shape=[len(encoded)])


class Translator(tf.Module):
    """Translates a batch of source-language sentences with a `Transformer` and its tokenizers.

    Sources are tokenized with `self.tokenizers.source` and truncated to `max_source_tokens`
    tokens (START first, END kept last), so arbitrarily long input is safe; at most
    `max_new_tokens` tokens are generated. Empty and whitespace-only sentences translate to `""`.

    Args:
      tokenizers: a `Tokenizers` module (or a loaded one) with `.source` and `.target`.
      model: a `tf_transformer.model.Transformer`.
      config: the decoding settings (`DecodeConfig`: beam size, length penalty and both caps;
        fields left at None take `DecodeConfig`'s defaults, the caps `min(128,
        model.config.max_length)`); kept resolved as `self.config`.
      jit_compile: XLA-compile the decoding loop (recompiles per input shape).

    Example:
      >>> translator = Translator(tokenizers, model, DecodeConfig(beam_size=4))
      >>> translator(["o carro vermelho é novo ."])["text"]
      <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'the red car is new.'], ...)>
    """

    def __init__(
        self,
        tokenizers,
        model,
        config: DecodeConfig | None = None,
        *,
        jit_compile: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.config = (config or DecodeConfig()).resolved(model.config.max_length)
        self.tokenizers = tokenizers
        self.model = model
        self.jit_compile = jit_compile
        self._functions: dict[tuple[DecodeConfig, bool], Any] = {}

    def source_ids(self, sentences: tf.Tensor, config: DecodeConfig | None = None) -> tf.Tensor:
        """`tf.string` `(batch,)` -> int64 `(batch, src_len)`, `src_len <= max_source_tokens`
        (of `config`, a resolved `DecodeConfig`; this Translator's when None).

        Invalid UTF-8 fails here, in the graph (InvalidArgumentError), before tokenization.
        """
        sentences = tf.strings.unicode_transcode(sentences, "UTF-8", "UTF-8", errors="strict")
        tokens = self.tokenizers.source.tokenize(sentences)  # ragged (batch, None), START ... END
        body = tokens[:, 1:-1][:, : (config or self.config).max_source_tokens - 2]
        batch = tf.shape(sentences, out_type=tf.int64)[0]
        starts = tf.fill([batch, 1], tf.constant(START_ID, tf.int64))
        ends = tf.fill([batch, 1], tf.constant(END_ID, tf.int64))
        return tf.concat([starts, body, ends], axis=1).to_tensor()

    def decoding(self, config: DecodeConfig | None = None) -> DecodeConfig:
        """This Translator's `config` with the fields `config` sets (resolved)."""
        if config is None:
            return self.config
        return self.config.replace(**config.given()).resolved(self.model.config.max_length)

    def graph_fn(self, config: DecodeConfig | None = None, *, all_beams: bool = False):
        """The `tf.function` `sentences tf.string (batch,) -> dict` for the decoding `config`
        (the fields it sets change this Translator's `config`).

        It has a fixed input signature (`STRINGS`), so it can go into a SavedModel as is.
        Returns a dict: `"text"` `tf.string (batch,)`, `"ids"` int64 `(batch, len)` (START first,
        PAD after END), `"scores"` and `"log_probs"` float32 `(batch,)`, `"lengths"` int32.
        `all_beams`: also `"alternatives"` `tf.string (batch, beam_size)`, every beam's text,
        best first (`"text"` is the first).
        """
        config = self.decoding(config)
        key = (config, all_beams)
        if key not in self._functions:
            decode = make_decode_fn(
                self.model,
                max_new_tokens=config.max_new_tokens,
                beam_size=config.beam_size,
                length_penalty=config.length_penalty,
                jit_compile=self.jit_compile,
                return_all_beams=all_beams and config.beam_size > 1,
            )

            # No AutoGraph: graph code throughout (see `make_decode_fn`).
            @tf.function(input_signature=[STRINGS], autograph=False)
            def translate(sentences):
                src = self.source_ids(sentences, config)
                out = decode(src)
                # Nothing to translate: an empty translation, not what the model makes of START END.
                empty = tf.math.count_nonzero(src, axis=1) <= 2  # START and END only
                beams = None
                if all_beams:  # every beam's text; the best one's fields as below
                    beams = self.beam_texts(out.ids, empty)
                    if config.beam_size > 1:
                        fields = ("ids", "log_probs", "scores", "lengths")
                        out = out._replace(**{f: getattr(out, f)[:, 0] for f in fields})
                width = tf.shape(out.ids)[1]
                nothing = tf.one_hot(0, width, START_ID, 0) + tf.one_hot(1, width, END_ID, 0)
                ids = tf.where(empty[:, tf.newaxis], nothing[tf.newaxis, :], out.ids)
                ids = tf.cast(ids, tf.int64)
                text = self.tokenizers.target.detokenize(ids)
                result = {
                    "text": tf.where(empty, tf.constant(""), text),
                    "ids": ids,
                    "scores": tf.where(empty, 0.0, out.scores),
                    "log_probs": tf.where(empty, 0.0, out.log_probs),
                    "lengths": tf.where(empty, 1, out.lengths),
                }
                if beams is not None:
                    result["alternatives"] = beams
                return result

            self._functions[key] = translate
        return self._functions[key]

    def beam_texts(self, ids: tf.Tensor, empty: tf.Tensor) -> tf.Tensor:
        """`tf.string (batch, beams)`: the text of every beam of `ids` `(batch, beams, len)` (or
        of the one hypothesis of `(batch, len)`); "" where `empty` (bool `(batch,)`: a source
        with nothing to translate)."""
        if len(ids.shape) == 2:
            ids = ids[:, tf.newaxis]
        shape = tf.shape(ids)
        flat = tf.cast(tf.reshape(ids, (-1, shape[2])), tf.int64)
        texts = tf.reshape(self.tokenizers.target.detokenize(flat), shape[:2])
        return tf.where(empty[:, tf.newaxis], tf.constant(""), texts)

    def translate(
        self,
        sentences: str | bytes | Iterable[str | bytes] | tf.Tensor,
        config: DecodeConfig | None = None,
        *,
        return_attention: bool = False,
    ) -> dict[str, Any]:
        """Translates a batch (or one sentence); the Python entry point.

        Args:
          sentences: a string, bytes, a list of them, or a string tensor `(batch,)`.
          config: a `DecodeConfig` whose set fields change the Translator's for this call
            (e.g. `DecodeConfig(beam_size=1)`: greedy).
          return_attention: also return, for the first sentence, `"attention"` float32
            `(heads, tgt_len, src_len)` (last decoder layer's cross-attention),
            `"src_tokens"` and `"tgt_tokens"` (lists of wordpieces labelling its axes).

        Returns:
          The dict of `graph_fn`, plus the attention entries when asked for.

        Raises:
          ValueError: a sentence is not valid UTF-8.
        """
        sentences = validate_utf8(sentences)
        config = self.decoding(config)
        result = self.graph_fn(config)(sentences)
        if return_attention:
            result.update(self.attention(sentences[:1], result["ids"][:1]))
        return result

    __call__ = translate

    def translate_batch(
        self, sentences: list[str], config: DecodeConfig | None = None
    ) -> list[str]:
        """Python strings in, Python strings out (e.g. for `evaluate`); `config` as in
        `translate`."""
        if not sentences:
            return []
        texts = self.translate(sentences, config)["text"].numpy()
        return [text.decode("utf-8") for text in texts]

    def all_beams(self, sentences: list[str], beam_size: int) -> list[list[str]]:
        """Every beam's translation of each sentence, best first: beam search with `beam_size`
        beams (the other settings this Translator's)."""
        if not sentences:
            return []
        config = self.config.replace(beam_size=beam_size)
        texts = self.graph_fn(config, all_beams=True)(validate_utf8(sentences))["alternatives"]
        return [[t.decode("utf-8") for t in row] for row in texts.numpy()]

    def attention_tensors(self, sentences: tf.Tensor, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        """Cross-attention of one translation, as tensors (eagerly or in a graph, such as the
        export's `attention` signature): the model re-run on (source, generated ids).

        Args:
          sentences: `tf.string` `(1,)`.
          ids: int64 `(1, len)` the translation's ids (START first, PAD after END).

        Returns:
          `"attention_weights"` float32 `(heads, tgt_len, src_len)` (the last decoder layer's
          cross-attention), `"source_tokens"` and `"target_tokens"` (the wordpieces labelling
          its axes: row `t` is the query that produced `target_tokens[t]`), and `"tokens"` int64
          `(tgt_len + 1,)`, START to END.
        """
        src = self.source_ids(sentences)
        generated = tf.reduce_sum(tf.cast(ids[0, 1:] > 0, tf.int32))  # END included
        decoder_in = ids[:, : tf.maximum(generated, 1)]  # START and every token but the last
        _, weights = self.model.call_with_attention((src, decoder_in), training=False)
        return {
            "tokens": ids[0, : generated + 1],
            "source_tokens": self.tokenizers.source.lookup(src)[0],
            "target_tokens": self.tokenizers.target.lookup(ids[:, 1 : generated + 1])[0],
            "attention_weights": weights["cross"][-1][0],
        }

    def attention(self, sentence: tf.Tensor, ids: tf.Tensor) -> dict[str, Any]:
        """Cross-attention of one translation (`attention_tensors`), for Python.

        Args:
          sentence: `tf.string` `(1,)`.
          ids: int64 `(1, len)` the translation's ids (START first).

        Returns:
          `{"attention": (heads, tgt_len, src_len), "src_tokens": [...], "tgt_tokens": [...]}`;
          row `t` is the query that produced `tgt_tokens[t]`.
        """
        out = self.attention_tensors(sentence, ids)
        return {
            "attention": out["attention_weights"],
            "src_tokens": [token.decode("utf-8") for token in out["source_tokens"].numpy()],
            "tgt_tokens": [token.decode("utf-8") for token in out["target_tokens"].numpy()],
        }
