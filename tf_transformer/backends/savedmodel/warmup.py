"""TF Serving warm-up requests: ``VERSION/assets.extra/tf_serving_warmup_requests``.

When TF Serving loads a SavedModel version it replays the requests in that file against it
before serving it (``--enable_model_warmup``, on by default), so lazy work (graph optimisation,
XLA compilation) happens at load and not on a user's first request. The file is a TFRecord of
``tensorflow.serving.PredictionLog`` protos, at most 1,000 records; a record that fails fails
the load (tensorflow_serving/servables/tensorflow/saved_model_warmup_util.cc).

The records are `tensorflow-serving-api`'s own `PredictionLog` messages, so the file holds
exactly what TF Serving parses.

Example:
    >>> write_warmup_requests("saved_models/transformer/1", "transformer",
    ...                       [WarmupRequest("greedy", {"sentences": np.array([b"ola ."])})])
    >>> read_warmup_requests("saved_models/transformer/1")[0].signature_name
    'greedy'
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from tf_transformer.errors import InvalidValueError

WARMUP_DIR = "assets.extra"  # TF's kSavedModelAssetsExtraDirectory
WARMUP_FILE = "tf_serving_warmup_requests"  # TF Serving's WarmupConsts::kRequestsFileName
MAX_RECORDS = 1000  # TF Serving's WarmupConsts::kMaxNumRecords

# Words that most WordPiece vocabularies hold as one token (single characters always are).
_ONE_TOKEN_WORDS = ("a", ".", "x", "o")


class WarmupRequest(NamedTuple):
    """One Predict call: the signature's name and its inputs by name (numpy arrays)."""

    signature_name: str
    inputs: dict[str, np.ndarray]


def prediction_log(
    request: WarmupRequest, model_name: str = ""
) -> prediction_log_pb2.PredictionLog:
    """The `PredictionLog` message of one request (a `predict_log` with its `PredictRequest`)."""
    log = prediction_log_pb2.PredictionLog()
    predict = log.predict_log.request
    predict.model_spec.name = model_name
    predict.model_spec.signature_name = request.signature_name
    for name, value in request.inputs.items():
        predict.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return log


def sentence_of_length(count_tokens: Callable[[str], int], length: int) -> str:
    """A sentence that `count_tokens` (sentence -> source ids, START and END included) makes
    exactly `length` ids long: one single-token word repeated.

    Raises:
        ValueError: no candidate word is a single token, or `length` < 3.
    """
    if length < 3:
        raise InvalidValueError(
            f"a sentence has at least 3 source ids (START, a token, END): {length}."
        )
    for word in _ONE_TOKEN_WORDS:
        sentence = " ".join([word] * (length - 2))
        if count_tokens(word) == 3 and count_tokens(sentence) == length:
            return sentence
    raise InvalidValueError(f"none of {_ONE_TOKEN_WORDS} is a single token for this tokenizer.")


def signature_requests(
    count_tokens: Callable[[str], int], lengths: list[int], batch_sizes: tuple[int, ...]
) -> list[WarmupRequest]:
    """The warm-up requests of an export's signatures: `serving_default` and `greedy` for every
    batch size of `batch_sizes` and every source length of `lengths` (each compiled shape of an
    XLA export), then `attention` for every length.

    Args:
        count_tokens: sentence -> its number of source ids (START and END included).
        lengths: source lengths in ids, e.g. one per source bucket.
        batch_sizes: batch sizes of `serving_default` and `greedy`.
    """
    sentences = [sentence_of_length(count_tokens, length).encode() for length in lengths]
    requests = [
        WarmupRequest(name, {"sentences": np.array([sentence] * batch, dtype=object)})
        for name in ("serving_default", "greedy")
        for batch in batch_sizes
        for sentence in sentences
    ]
    requests += [
        WarmupRequest("attention", {"sentence": np.array(sentence, dtype=object)})
        for sentence in sentences
    ]
    return requests


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
        raise InvalidValueError(
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
    requests = []
    for record in tf.data.TFRecordDataset(str(warmup_path(version_dir))).as_numpy_iterator():
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        inputs = {name: tf.make_ndarray(value) for name, value in request.inputs.items()}
        requests.append(WarmupRequest(request.model_spec.signature_name, inputs))
    return requests
