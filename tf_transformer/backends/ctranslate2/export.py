"""CTranslate2 export: a run's weights as a CTranslate2 model directory, with the vocabularies.

CTranslate2 (OpenNMT's C++ inference engine; ``pip install .[ctranslate2]``) is a second
serving target and the peer our decoders are measured against (``bench/ctranslate2_peer.py``).
The conversion goes through CTranslate2's own converter API: a `TransformerSpec` filled from our
Keras weights, saved by a `ctranslate2.converters.Converter`.

What maps to what (CTranslate2 names on the right):

* post-norm (the paper) and pre-norm (``norm_first``, with its final LayerNorm per stack):
  ``pre_norm``; each block's LayerNorm is the norm of its sublayer (``norm1`` ->
  ``self_attention.layer_norm``, ``norm2`` -> ``attention.layer_norm`` in the decoder or
  ``ffn.layer_norm`` in the encoder, ``norm3`` -> ``ffn.layer_norm``); epsilon 1e-6 is written
  to the config.
* Dense kernels are ``(in, out)``, CTranslate2 weights ``(out, in)``: transposed. Self-attention
  q/k/v are fused into one ``(3 d_model, d_model)`` weight, cross-attention k/v into one;
  the heads are contiguous slices of ``d_model`` in both.
* Positions: our sinusoid table is written as ``position_encodings.encodings`` (row ``t`` for
  position ``t``, START at 0), so both of our layouts, ``interleaved`` (the paper's
  ``sin, cos, sin, cos, ...``) and ``concat`` (the tutorial's sines then cosines), are exported exactly; CTranslate2's own
  table (used when none is given) matches neither (greedy ids differ without our table).
  Embeddings are scaled by ``sqrt(d_model)`` in both (``scale_embeddings``).
* The feed-forward activation: ``relu`` or ``gelu`` (Keras' exact, erf form: CTranslate2's
  ``GELU``, not ``GELUTanh``).
* Tied target embeddings (``share_target_embeddings``): the projection is the target embedding
  matrix with a zero bias. With ``share_embeddings`` that one matrix is also the source
  embedding: the same weights are written for both embeddings and the projection.
* Tokens: the vocabularies of the run's tokenizers, reserved tokens first; ``[START]`` is the
  BOS and decoder start token, ``[END]`` the EOS token, both added to the source by CTranslate2
  (``add_source_bos``/``add_source_eos``), so the source is the WordPiece tokens alone, as
  ``tokenizers.source.tokenize`` gives them. Our decoders never emit ``[PAD]``: translate with
  ``suppress_sequences=[["[PAD]"]]`` for the same search.

Beside CTranslate2's files, the export holds our tokenizers as plain files and
``ctranslate2.json`` (`backends.export_files`: each file's size and SHA-256, the tokenizers'
settings, the languages and the decoding defaults), so `backends.ctranslate2.translator` turns
text into CTranslate2's tokens and back without TensorFlow.

Example:
    >>> export_ctranslate2("runs/tiny", "ct2/tiny")
    >>> translator = ctranslate2.Translator("ct2/tiny", intra_threads=1)
    >>> translator.translate_batch([["ola", "."]], beam_size=1, suppress_sequences=[["[PAD]"]])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from tf_transformer.atomic_files import write_directory
from tf_transformer.backends.ctranslate2.translator import METADATA_FILE
from tf_transformer.backends.export_files import (
    file_entries,
    vocabulary,
    write_metadata,
    write_tokenizers,
)
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError, PathExistsError
from tf_transformer.text.special_tokens import RESERVED_TOKENS

PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN = RESERVED_TOKENS
LAYER_NORM_EPSILON = 1e-6


def export_ctranslate2(
    source: str | os.PathLike | tuple[Any, Any],
    output_dir: str | os.PathLike,
    *,
    quantization: str | None = None,
    checkpoint: str | None = None,
    config: DecodeConfig | None = None,
) -> Path:
    """Writes a CTranslate2 model directory (``model.bin``, ``config.json``, vocabularies).

    The directory is written into a hidden sibling and renamed into place when complete
    (`atomic_files.write_directory`); an existing directory is never overwritten.

    Args:
        source: a run directory (config.json, tokenizers/, checkpoints/), or a
            ``(model, tokenizers)`` pair: a `Transformer` and tokenizers with ``.source`` and
            ``.target`` (each with its ``vocab``).
        output_dir: the model directory to create.
        quantization: CTranslate2 weight type (``"int8"``, ``"float16"``, ...; None keeps
            float32). A float32 export can still be loaded with any ``compute_type``.
        checkpoint: for a run directory: None/"latest", "averaged" or a checkpoint prefix.
        config: the decoding defaults recorded for the translator (resolved against the
            model's `max_length`; its caps are the most a request may ask).

    Returns:
        The model directory.

    Raises:
        FileExistsError: `output_dir` exists (it is left untouched).
        WriteError: a write failed (a full disk); nothing is left at `output_dir`.
        ImportError: ctranslate2 is not installed.
        ValueError: a vocabulary does not match the model's size or reserved tokens.
    """
    output_dir = Path(output_dir)
    if output_dir.exists():
        raise PathExistsError(f"{output_dir} exists; a CTranslate2 export is never overwritten.")
    from ctranslate2.converters.converter import Converter  # optional dependency

    if isinstance(source, tuple):
        model, tokenizers = source
    else:
        from tf_transformer.backends.base import load_run

        tokenizers, model = load_run(source, checkpoint)
    spec = transformer_spec(model, vocabulary(tokenizers.source), vocabulary(tokenizers.target))
    decoding = (config or DecodeConfig()).resolved(model.config.max_length)

    class SpecConverter(Converter):
        def _load(self):
            return spec

    def save(tmp: str) -> None:
        # The converter recreates the temporary directory it is given (force=True) and fills it.
        SpecConverter().convert(tmp, quantization=quantization, force=True)
        folder = Path(tmp)
        entries = write_tokenizers(folder, tokenizers)
        files = sorted(p.name for p in folder.iterdir() if p.is_file())
        metadata = {
            "files": file_entries(folder, files),
            "quantization": quantization or "float32",
            **entries,
            "decoding": decoding.to_dict(),
        }
        write_metadata(folder, METADATA_FILE, metadata)

    return write_directory(output_dir, save, replace=False)


def transformer_spec(model, source_vocab: list[str], target_vocab: list[str]):
    """A filled `ctranslate2.specs.TransformerSpec` for `model` (see the module docstring)."""
    from ctranslate2.specs import transformer_spec as ct2

    config = model.config
    for name, vocab, size in (
        ("source", source_vocab, config.input_vocab_size),
        ("target", target_vocab, config.target_vocab_size),
    ):
        if len(vocab) != size or tuple(vocab[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise InvalidValueError(
                f"The {name} vocabulary ({len(vocab)} tokens, starting {vocab[:4]}) does not "
                f"match the model ({size} tokens starting {list(RESERVED_TOKENS)})."
            )
    model.build()
    from ctranslate2.specs.common_spec import Activation

    sizes = {"num_layers": config.num_layers, "num_heads": config.num_heads}
    # Keras' "gelu" is the exact (erf) one, CTranslate2's GELU; "relu" its default.
    sizes["activation"] = {"relu": Activation.RELU, "gelu": Activation.GELU}[config.activation]
    spec = ct2.TransformerSpec(
        ct2.TransformerEncoderSpec(pre_norm=config.norm_first, **sizes),
        ct2.TransformerDecoderSpec(pre_norm=config.norm_first, **sizes),
    )
    _set_encoder(spec.encoder, model.encoder)
    _set_decoder(spec.decoder, model)
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.config.unk_token = UNK_TOKEN
    spec.config.bos_token = START_TOKEN
    spec.config.eos_token = END_TOKEN
    spec.config.decoder_start_token = START_TOKEN
    spec.config.add_source_bos = True
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(source_vocab)
    spec.register_target_vocabulary(target_vocab)
    return spec


def _numpy(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), dtype=np.float32)


def _set_linear(spec, dense) -> None:
    spec.weight = _numpy(dense.kernel).T  # (out, in)
    spec.bias = _numpy(dense.bias)


def _set_fused(spec, dense_layers) -> None:
    """One linear whose output is the concatenated outputs of `dense_layers`."""
    spec.weight = np.concatenate([_numpy(d.kernel).T for d in dense_layers], axis=0)
    spec.bias = np.concatenate([_numpy(d.bias) for d in dense_layers], axis=0)


def _set_norm(spec, norm) -> None:
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _set_ffn(spec, ffn, norm) -> None:
    _set_linear(spec.linear_0, ffn.inner)
    _set_linear(spec.linear_1, ffn.outer)
    _set_norm(spec.layer_norm, norm)


def _set_stack_inputs(spec, stack) -> None:
    """Embeddings, the exact sinusoid table and the final norm (pre-norm) of a stack."""
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _numpy(stack.embedding.embedding.embeddings)
    spec.position_encodings.encodings = np.asarray(stack.embedding.pos_encoding, np.float32)
    if stack.final_norm is not None:
        _set_norm(spec.layer_norm, stack.final_norm)


def _set_self_attention(spec, layer) -> None:
    """A layer's self-attention (q/k/v fused) and its block's norm, `norm1`."""
    attention = layer.self_attention
    _set_fused(spec.linear[0], [attention.wq, attention.wk, attention.wv])
    _set_linear(spec.linear[1], attention.wo)
    _set_norm(spec.layer_norm, layer.norm1)


def _set_encoder(spec, encoder) -> None:
    _set_stack_inputs(spec, encoder)
    for layer_spec, layer in zip(spec.layer, encoder.stack, strict=True):
        _set_self_attention(layer_spec.self_attention, layer)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.norm2)


def _set_decoder(spec, model) -> None:
    decoder = model.decoder
    _set_stack_inputs(spec, decoder)
    for layer_spec, layer in zip(spec.layer, decoder.stack, strict=True):
        _set_self_attention(layer_spec.self_attention, layer)
        cross = layer.cross_attention
        _set_linear(layer_spec.attention.linear[0], cross.wq)
        _set_fused(layer_spec.attention.linear[1], [cross.wk, cross.wv])
        _set_linear(layer_spec.attention.linear[2], cross.wo)
        _set_norm(layer_spec.attention.layer_norm, layer.norm2)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.norm3)
    if model.final_layer is None:  # tied: the projection is the target embedding matrix
        table = _numpy(decoder.embedding.embedding.embeddings)
        spec.projection.weight = table
        spec.projection.bias = np.zeros(table.shape[0], np.float32)
    else:
        _set_linear(spec.projection, model.final_layer)
