"""TF Serving warm-up requests: ``VERSION/assets.extra/tf_serving_warmup_requests``.

When TF Serving loads a SavedModel version it replays the requests in that file against it
before serving it (``--enable_model_warmup``, on by default), so lazy work (graph optimisation,
XLA compilation) happens at load and not on a user's first request. The file is a TFRecord of
``tensorflow.serving.PredictionLog`` protos, at most 1,000 records; a record that fails fails
the load (tensorflow_serving/servables/tensorflow/saved_model_warmup_util.cc).

The messages are built here from the field numbers of tensorflow_serving/apis/model.proto,
predict.proto and prediction_log.proto (only the fields a warm-up request uses), in a private
descriptor pool: writing and reading the file needs no ``tensorflow-serving-api``, and does not
clash with it when both are imported. The bytes are the same as that package writes.

Example:
    >>> write_warmup_requests("saved_models/transformer/1", "transformer",
    ...                       [WarmupRequest("greedy", {"sentences": np.array([b"ola ."])})])
    >>> read_warmup_requests("saved_models/transformer/1")[0].signature_name
    'greedy'
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import tensor_pb2

WARMUP_DIR = "assets.extra"  # TF's kSavedModelAssetsExtraDirectory
WARMUP_FILE = "tf_serving_warmup_requests"  # TF Serving's WarmupConsts::kRequestsFileName
MAX_RECORDS = 1000  # TF Serving's WarmupConsts::kMaxNumRecords

# Words that most WordPiece vocabularies hold as one token (single characters always are).
_ONE_TOKEN_WORDS = ("a", ".", "x", "o")
_PACKAGE = "tensorflow.serving"
_F = descriptor_pb2.FieldDescriptorProto


class WarmupRequest(NamedTuple):
    """One Predict call: the signature's name and its inputs by name (numpy arrays)."""

    signature_name: str
    inputs: dict[str, np.ndarray]


def _field(name: str, number: int, kind: int, type_name: str = "", repeated: bool = False):
    label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    field = _F(name=name, number=number, type=kind, label=label)
    if type_name:  # an empty type_name still counts as set, and scalars must not have one
        field.type_name = type_name
    return field


def _message(name: str, *fields, nested=(), options=None) -> descriptor_pb2.DescriptorProto:
    return descriptor_pb2.DescriptorProto(
        name=name, field=list(fields), nested_type=list(nested), options=options
    )


def _file_protos(file_descriptor, seen: set[str]) -> list[descriptor_pb2.FileDescriptorProto]:
    """`file_descriptor` and everything it imports, dependencies first."""
    protos = []
    for dependency in file_descriptor.dependencies:
        protos += _file_protos(dependency, seen)
    if file_descriptor.name not in seen:
        seen.add(file_descriptor.name)
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        protos.append(proto)
    return protos


@functools.cache
def prediction_log_classes() -> types.SimpleNamespace:
    """The message classes `PredictionLog`, `PredictLog`, `PredictRequest`, `ModelSpec` and
    `TensorProto` (tensorflow.serving / tensorflow), from a private descriptor pool."""
    message = _F.TYPE_MESSAGE
    model_spec = _message(
        "ModelSpec",
        _field("name", 1, _F.TYPE_STRING),
        _field("signature_name", 3, _F.TYPE_STRING),
    )
    inputs_entry = _message(
        "InputsEntry",
        _field("key", 1, _F.TYPE_STRING),
        _field("value", 2, message, ".tensorflow.TensorProto"),
        options=descriptor_pb2.MessageOptions(map_entry=True),
    )
    predict_request = _message(
        "PredictRequest",
        _field("model_spec", 1, message, f".{_PACKAGE}.ModelSpec"),
        _field("inputs", 2, message, f".{_PACKAGE}.PredictRequest.InputsEntry", repeated=True),
        _field("output_filter", 3, _F.TYPE_STRING, repeated=True),
        nested=[inputs_entry],
    )
    predict_log = _message(
        "PredictLog", _field("request", 1, message, f".{_PACKAGE}.PredictRequest")
    )
    prediction_log = _message(
        "PredictionLog", _field("predict_log", 6, message, f".{_PACKAGE}.PredictLog")
    )
    prediction_log.field[0].oneof_index = 0
    prediction_log.oneof_decl.add(name="log_type")
    warmup_file = descriptor_pb2.FileDescriptorProto(
        name="tf_transformer/warmup/prediction_log.proto",
        package=_PACKAGE,
        syntax="proto3",
        dependency=[tensor_pb2.DESCRIPTOR.name],
        message_type=[model_spec, predict_request, predict_log, prediction_log],
    )
    pool = descriptor_pool.DescriptorPool()
    for proto in [*_file_protos(tensor_pb2.DESCRIPTOR, set()), warmup_file]:
        pool.Add(proto)
    names = {
        "PredictionLog": f"{_PACKAGE}.PredictionLog",
        "PredictLog": f"{_PACKAGE}.PredictLog",
        "PredictRequest": f"{_PACKAGE}.PredictRequest",
        "ModelSpec": f"{_PACKAGE}.ModelSpec",
        "TensorProto": "tensorflow.TensorProto",
    }
    return types.SimpleNamespace(
        **{
            key: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
            for key, name in names.items()
        }
    )


def prediction_log(request: WarmupRequest, model_name: str = ""):
    """The `PredictionLog` message of one request (a `predict_log` with its `PredictRequest`)."""
    classes = prediction_log_classes()
    log = classes.PredictionLog()
    predict = log.predict_log.request
    predict.model_spec.name = model_name
    predict.model_spec.signature_name = request.signature_name
    for name, value in request.inputs.items():
        tensor = tf.make_tensor_proto(value)
        predict.inputs[name].ParseFromString(tensor.SerializeToString())
    return log


def sentence_of_length(count_tokens: Callable[[str], int], length: int) -> str:
    """A sentence that `count_tokens` (sentence -> source ids, START and END included) makes
    exactly `length` ids long: one single-token word repeated.

    Raises:
        ValueError: no candidate word is a single token, or `length` < 3.
    """
    if length < 3:
        raise ValueError(f"a sentence has at least 3 source ids (START, a token, END): {length}.")
    for word in _ONE_TOKEN_WORDS:
        sentence = " ".join([word] * (length - 2))
        if count_tokens(word) == 3 and count_tokens(sentence) == length:
            return sentence
    raise ValueError(f"none of {_ONE_TOKEN_WORDS} is a single token for this tokenizer.")


def warmup_path(version_dir: str | Path) -> Path:
    """Where TF Serving looks for a version's warm-up requests."""
    return Path(version_dir) / WARMUP_DIR / WARMUP_FILE


def write_warmup_requests(
    version_dir: str | Path, model_name: str, requests: list[WarmupRequest]
) -> Path:
    """Writes `requests` as the warm-up file of the SavedModel in `version_dir`.

    Args:
        version_dir: a SavedModel directory (a version directory of a model base path).
        model_name: the model name written into each request (TF Serving's warm-up does not
            check it; the signature name is what it runs).
        requests: the Predict calls to replay, in order.

    Returns:
        The file written.

    Raises:
        ValueError: more requests than TF Serving accepts (`MAX_RECORDS`).
    """
    if len(requests) > MAX_RECORDS:
        raise ValueError(
            f"{len(requests)} warm-up requests; TF Serving accepts at most {MAX_RECORDS}."
        )
    path = warmup_path(version_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for request in requests:
            writer.write(prediction_log(request, model_name).SerializeToString())
    return path


def read_warmup_requests(version_dir: str | Path) -> list[WarmupRequest]:
    """The requests of a version's warm-up file, parsed as `PredictionLog` records."""
    classes = prediction_log_classes()
    requests = []
    for record in tf.data.TFRecordDataset(str(warmup_path(version_dir))).as_numpy_iterator():
        request = classes.PredictionLog.FromString(record).predict_log.request
        inputs = {
            name: tf.make_ndarray(tensor_pb2.TensorProto.FromString(value.SerializeToString()))
            for name, value in request.inputs.items()
        }
        requests.append(WarmupRequest(request.model_spec.signature_name, inputs))
    return requests
