"""A stand-in for TF Serving's gRPC `PredictionService.Predict`, on top of a real loaded SavedModel.

Built with grpcio on `tensorflow-serving-api`'s own protos, as the REST stand-in
(tests/predict_server.py) is built on our JSON functions, and sharing its `ServedModel`. It
answers like TF Serving: a `PredictResponse` with the signature's outputs; NOT_FOUND for an
unknown model or version; INVALID_ARGUMENT for an unknown signature or a bad input tensor.
"""

from __future__ import annotations

from concurrent import futures
from typing import Self

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tests.predict_server import ServedModel
from tf_transformer.backends.savedmodel.rest_client import INPUT_NAME


class GrpcPredictServer(ServedModel):
    """Serves `loaded` over gRPC as model `model_name`, version `version` (`ServedModel`).

    Use as a context manager; `url` is ``grpc://127.0.0.1:PORT``.
    """

    def __init__(self, loaded, model_name: str = "transformer", version: int = 1, workers=16):
        super().__init__(loaded, model_name, version)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            _Servicer(self), self._server
        )
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def url(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop(grace=None).wait(timeout=10)


def request_sentences(request: predict_pb2.PredictRequest):
    """The request's 1-D string tensor `sentences`; ValueError with TF Serving's words else."""
    if set(request.inputs) != {INPUT_NAME}:
        raise ValueError(
            f"Expected input {INPUT_NAME!r}, got {sorted(request.inputs)} "
            "(the signature takes exactly that one)."
        )
    tensor = request.inputs[INPUT_NAME]
    if tensor.dtype != tf.string.as_datatype_enum:
        got = tf.as_dtype(tensor.dtype).name
        raise ValueError(f"Expects arg[0] to be string but {got} is provided")
    value = tf.make_ndarray(tensor)
    if value.ndim != 1:
        raise ValueError(f"input must be a vector of strings, got shape {list(value.shape)}")
    return value


class _Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, server: GrpcPredictServer):
        self.server = server

    def Predict(self, request, context):
        server = self.server
        server.received()
        spec = request.model_spec
        version = spec.version.value if spec.HasField("version") else None
        missing = server.missing(spec.name, version)
        if missing:
            context.abort(grpc.StatusCode.NOT_FOUND, missing)
        signature = spec.signature_name or "serving_default"
        unknown = server.unknown_signature(signature)
        if unknown:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, unknown)
        try:
            sentences = request_sentences(request)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        response = predict_pb2.PredictResponse()
        response.model_spec.name = server.model_name
        response.model_spec.version.value = server.version
        response.model_spec.signature_name = signature
        for name, value in server.run(signature, sentences).items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
        return response
