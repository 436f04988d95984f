"""The ops in a SavedModel's graph, classified as core TF, TF Text or other (for TF Serving).

A TF Serving binary runs a SavedModel only if every op in it is registered in the server: core
TensorFlow ops, plus the TF Text op library that the stock server links (TF Serving 2.12–2.19
bundle TF Text 2.12.1, 2.20 bundles 2.20.0; tensorflow/serving#2267). `graph_ops` lists every op
of the main graphs and of all functions in their libraries; `classify_ops` sorts them.

Example:
    >>> ops = graph_ops("saved_models/transformer/1")
    >>> classify_ops(ops)["other"]
    []
"""

from __future__ import annotations

import functools
from pathlib import Path

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.client import pywrap_tf_session

from tf_transformer.errors import InvalidValueError

# TF Text ops that a SavedModel may use and still load in TF Serving 2.12 or later: each was in
# TF Text 2.12 (and long before), which TF Serving 2.12–2.19 bundle. Newer ops, e.g.
# RoundRobinTrim (TF Text 2.16), are "not registered" in those servers. Extend with care.
LONG_STANDING_TEXT_OPS = frozenset(
    {
        "NormalizeUTF8",  # NFC/NFKC normalisation (our tokenizers: NFC)
        "RegexSplitWithOffsets",  # BasicTokenizer's word split (our tokenizers)
        "WordpieceTokenizeWithOffsets",  # WordpieceTokenizer / BertTokenizer (our tokenizers)
        "CaseFoldUTF8",  # BertTokenizer(lower_case=True); failed in one old server build (#281)
        "NormalizeUTF8WithOffsetsMap",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>FastWordpieceDetokenize",
        "FastBertNormalize",
        "WhitespaceTokenizeWithOffsets",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "UnicodeScriptTokenizeWithOffsets",
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceStringToIdOp",
        "SentencepieceVocabSizeOp",
    }
)


def graph_ops(saved_model_dir: str | Path) -> list[str]:
    """Sorted names of every op type in the SavedModel (main graphs and function libraries).

    Calls of library functions by name (a node whose op is a function name) are followed, not
    listed.
    """
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(saved_model_dir) / "saved_model.pb").read_bytes())
    ops: set[str] = set()
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        functions = {f.signature.name for f in graph.library.function}
        ops.update(node.op for node in graph.node)
        for function in graph.library.function:
            ops.update(node.op for node in function.node_def)
        ops -= functions
    return sorted(ops)


@functools.cache
def text_op_names() -> frozenset[str]:
    """Op names registered by the TF Text op libraries (`tensorflow_text/**/_*.so`)."""
    import tensorflow_text

    root = Path(tensorflow_text.__file__).parent
    names: set[str] = set()
    for library in sorted(root.rglob("_*.so")):
        # Already loaded by `import tensorflow_text`: this only reads the library's op list.
        handle = pywrap_tf_session.TF_LoadLibrary(str(library))
        try:
            op_list = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetOpList(handle))
        finally:
            pywrap_tf_session.TF_DeleteLibraryHandle(handle)
        names.update(op.name for op in op_list.op)
    return frozenset(names)


def is_core_op(name: str) -> bool:
    """True for an op of core TensorFlow (in `tf.raw_ops`, which TF Text does not extend)."""
    return hasattr(tf.raw_ops, name)


def classify_ops(ops: list[str]) -> dict[str, list[str]]:
    """Sorts op names into `{"core": [...], "text": [...], "other": [...]}`.

    "text" wins over "core" for a name in both (none today); "other" is everything a stock
    TF Serving would not know.
    """
    text = text_op_names()
    classes: dict[str, list[str]] = {"core": [], "text": [], "other": []}
    for name in sorted(set(ops)):
        if name in text:
            classes["text"].append(name)
        elif is_core_op(name):
            classes["core"].append(name)
        else:
            classes["other"].append(name)
    return classes


def check_serving_ops(saved_model_dir: str | Path) -> dict[str, list[str]]:
    """Classifies the SavedModel's ops; raises ValueError for ops a TF Serving 2.12+ may lack.

    Returns:
        The `classify_ops` classes.
    """
    classes = classify_ops(graph_ops(saved_model_dir))
    recent = sorted(set(classes["text"]) - LONG_STANDING_TEXT_OPS)
    if classes["other"] or recent:
        raise InvalidValueError(
            f"{saved_model_dir} uses ops a stock TF Serving may not register: "
            f"unknown {classes['other']}, TF Text ops outside the long-standing list {recent}."
        )
    return classes
