"""Exceptions raised by the data sources, so callers can catch one class per failure kind."""

from tf_transformer.errors import TransformerError


class DataFormatError(ValueError, TransformerError):
    """A local corpus (text files, TSV, tarball member) is malformed or incomplete."""


class DatasetUnavailableError(RuntimeError, TransformerError):
    """A dataset cannot be obtained (dead download URL, not prepared, bad checksum)."""
