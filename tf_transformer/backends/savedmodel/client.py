"""What the REST and gRPC clients of TF Serving share: the error they raise, and batching."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.errors import InvalidValueError, TransformerError


class ServingError(TransformerError):
    """Any failure talking to the model server: unreachable, timed out, or an error answer.

    Attributes:
        status: the HTTP status of a non-200 REST answer, else None.
        code: the gRPC status name of a failed gRPC call (e.g. "NOT_FOUND"), else None.
        message: the server's error text (or a description of the failure).
    """

    def __init__(self, message: str, status: int | None = None, code: str | None = None):
        prefix = f"HTTP {status}: " if status is not None else f"gRPC {code}: " if code else ""
        super().__init__(prefix + message)
        self.status = status
        self.code = code
        self.message = message

    @property
    def not_found(self) -> bool:
        """The server does not know the model or version (REST 404, gRPC NOT_FOUND)."""
        return self.status == 404 or self.code == "NOT_FOUND"


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class BatchingClient:
    """What the REST and gRPC clients share: the model they ask for, and batching.

    A subclass sends one batch with `_predict_batch(sentences) -> rows`.

    Args:
        model_name: the served model's name (`--model_name` of the server).
        version: a fixed model version; None for the server's latest.
        signature: `serving_default` (beam search) or `greedy`.
        timeout: seconds to wait for each request.
        batch_size: sentences per request.
    """

    def __init__(
        self,
        model_name: str,
        *,
        version: int | None = None,
        signature: str = "serving_default",
        timeout: float = 30.0,
        batch_size: int = 32,
    ):
        if batch_size < 1:
            raise InvalidValueError(f"batch_size must be positive, got {batch_size}.")
        self.model_name = model_name
        self.version = version
        self.signature = signature
        self.timeout = timeout
        self.batch_size = batch_size

    def predict(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        """All outputs (`translations`, `scores`, `tokens`), one dict per sentence."""
        sentences = list(sentences)
        rows: list[dict[str, Any]] = []
        for batch in _batches(sentences, self.batch_size):
            rows.extend(self._predict_batch(batch))
        if len(rows) != len(sentences):
            raise ServingError(f"Asked for {len(sentences)} translations, got {len(rows)}.")
        return rows

    def translate(self, sentences: Sequence[str]) -> list[str]:
        """English translations of Portuguese `sentences`, in order."""
        return [row["translations"] for row in self.predict(sentences)]

    def _predict_batch(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Releases what the client opened (nothing, unless a subclass says otherwise)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
