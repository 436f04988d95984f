"""A model served by TF Serving: `serving_client(url, ...)` picks the REST or gRPC client by
the URL's scheme, and `ServerTranslator` puts the translator's face on it."""

from __future__ import annotations

from tf_transformer.backends.base import BaseTranslator, distinct
from tf_transformer.backends.savedmodel.client import BatchingClient
from tf_transformer.backends.savedmodel.translator import exported_decoding
from tf_transformer.config import DecodeConfig

SCHEMES = ("http://", "https://", "grpc://")
DEFAULT_MODEL_NAME = "transformer"  # the name `tf-transformer export` files a model under


def serving_client(url: str, model_name: str, **settings) -> BatchingClient:
    """A client for TF Serving at `url`: gRPC for ``grpc://host:8500``, else REST
    (``http://host:8501``). `settings` are the clients' keyword arguments."""
    if url.startswith("grpc://"):
        from tf_transformer.backends.savedmodel.grpc_client import GrpcServingClient

        return GrpcServingClient(url, model_name, **settings)
    from tf_transformer.backends.savedmodel.rest_client import ServingClient

    return ServingClient(url, model_name, **settings)


class ServerTranslator(BaseTranslator):
    """A model served by TF Serving over REST or gRPC; the export's decoding settings are not
    known here, so a request takes beam size 1 (the `greedy` signature) or none."""

    def __init__(
        self,
        url: str,
        config: DecodeConfig,
        model_name: str = DEFAULT_MODEL_NAME,
        batch_size: int = 32,
    ):
        where = f"the served model {model_name!r}"
        self.signature, self.config = exported_decoding(where, None, config, False)
        self.url, self.model_name, self.batch_size = url, model_name, batch_size
        self.client = serving_client(
            url, model_name, signature=self.signature, batch_size=batch_size
        )
        self.description = f"TF Serving {url}, model {model_name} (signature {self.signature})"

    def translate(self, sentences: list[str]) -> list[str]:
        return self.client.translate(list(sentences))

    def translate_n_best(self, sentences: list[str], n: int) -> list[list[str]]:
        """The `alternatives` signature's beams, repeats left out: at most the export's beam
        size (the server does not say it)."""
        if not sentences:
            return []
        client = serving_client(
            self.url, self.model_name, signature="alternatives", batch_size=self.batch_size
        )
        with client:
            rows = client.predict(list(sentences))
        return [distinct([text_of(t) for t in row["alternatives"]])[:n] for row in rows]


def text_of(value) -> str:
    """An answer's string, as REST (str) or gRPC (bytes) gives it."""
    return value.decode("utf-8") if isinstance(value, bytes) else value
