"""Serving: the SavedModel export for TF Serving (`export`, its `warmup` requests, numbered
`versions`, the ops it needs in `graph_ops`), the REST and gRPC clients (`rest_client`,
`grpc_client`, what they share in `client`), and the CTranslate2 export.

`serving_client(url, ...)` picks the client by the URL's scheme.
"""

from __future__ import annotations

from tf_transformer.inference.serving.client import BatchingClient


def serving_client(url: str, model_name: str, **settings) -> BatchingClient:
    """A client for TF Serving at `url`: gRPC for ``grpc://host:8500``, else REST
    (``http://host:8501``). `settings` are the clients' keyword arguments."""
    if url.startswith("grpc://"):
        from tf_transformer.inference.serving.grpc_client import GrpcServingClient

        return GrpcServingClient(url, model_name, **settings)
    from tf_transformer.inference.serving.rest_client import ServingClient

    return ServingClient(url, model_name, **settings)
