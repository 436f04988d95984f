"""Exceptions raised by the data sources, so callers can catch one class per failure kind."""


class DataFormatError(ValueError):
    """A local corpus (text files, TSV, tarball member) is malformed or incomplete."""


class DatasetUnavailableError(RuntimeError):
    """A dataset cannot be obtained (dead download URL, not prepared, bad checksum)."""
