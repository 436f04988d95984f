"""A gRPC client for TF Serving (port 8500, `tensorflow.serving.PredictionService/Predict`).

It speaks TF Serving's own protos from `tensorflow-serving-api` (`predict_pb2`,
`prediction_service_pb2_grpc`) and answers like the REST client
(`tf_transformer.backends.savedmodel.rest_client.ServingClient`): one dict of outputs per sentence,
`translations` as text. A request is a `PredictRequest` whose input `sentences` is a 1-D string
tensor; the answer's `outputs` hold `translations`, `scores` and `tokens`.

Example:
    >>> client = GrpcServingClient("grpc://localhost:8500", "transformer", batch_size=16)
    >>> client.translate(["este é um problema que temos que resolver ."])
    ['this is a problem we have to solve .']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tf_transformer.backends.savedmodel.client import BatchingClient, ServingError
from tf_transformer.backends.savedmodel.rest_client import INPUT_NAME, make_response
from tf_transformer.errors import InvalidValueError

SCHEME = "grpc://"
# Beam search answers carry every beam's tokens; gRPC's default 4 MB cap is too small for
# large batches of long sentences, so both directions take up to 256 MB, as TF Serving allows.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


def grpc_target(url: str) -> str:
    """``grpc://host:8500`` (or ``host:8500``) -> ``host:8500``, the channel's target."""
    target = url.removeprefix(SCHEME).rstrip("/")
    if not target or "/" in target or "://" in target:
        raise InvalidValueError(f"A gRPC server address is grpc://HOST:PORT, got {url!r}.")
    return target


def make_predict_request(
    sentences: Sequence[str],
    model_name: str,
    signature: str = "serving_default",
    version: int | None = None,
) -> predict_pb2.PredictRequest:
    """The `PredictRequest` for a batch of source sentences."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    texts = [str(s).encode("utf-8") for s in sentences]
    request.inputs[INPUT_NAME].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
    return request


def parse_predict_response(response: predict_pb2.PredictResponse) -> list[dict[str, Any]]:
    """A `PredictResponse` as one dict of outputs per sentence (the REST client's rows)."""
    columns = {name: tf.make_ndarray(tensor) for name, tensor in response.outputs.items()}
    try:
        return make_response(columns)["predictions"]
    except ValueError as error:
        raise ServingError(f"Malformed answer: {error}") from None


class GrpcServingClient(BatchingClient):
    """Translates through TF Serving's gRPC API (`PredictionService.Predict`), in batches.

    One channel per client; gRPC channels are thread-safe, so threads may share a client.

    Args:
        url: ``grpc://host:port`` (TF Serving's `--port`, 8500 by default).
        model_name: the served model's name.
        channel: an optional channel (TLS, custom options); the client does not close it.
        **settings: `version`, `signature`, `timeout` (each call's deadline) and `batch_size`,
            as `BatchingClient` takes them.
    """

    def __init__(
        self, url: str, model_name: str, *, channel: grpc.Channel | None = None, **settings
    ):
        super().__init__(model_name, **settings)
        self.target = grpc_target(url)
        self.url = SCHEME + self.target
        self._own_channel = channel is None
        self.channel = channel or grpc.insecure_channel(
            self.target,
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def close(self) -> None:
        """Closes the channel the client opened."""
        if self._own_channel:
            self.channel.close()

    def _predict_batch(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return self._call(
            make_predict_request(sentences, self.model_name, self.signature, self.version)
        )

    def _call(self, request: predict_pb2.PredictRequest) -> list[dict[str, Any]]:
        try:
            response = self.stub.Predict(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise _serving_error(error, self.url, self.timeout) from None
        return parse_predict_response(response)


def _serving_error(error: grpc.RpcError, url: str, timeout: float) -> ServingError:
    """One line for a failed call: the server's status and message, or what went wrong."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ServingError(f"{url} did not answer within {timeout} s.")
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServingError(f"Cannot reach {url}: {details.splitlines()[0]}")
    return ServingError(details.splitlines()[0] if details else code.name, code=code.name)
