"""Parallel pt→en data: sources (TFDS, TED tarball, text files, sample) and the tf.data pipeline."""

from tf_transformer.data.errors import DataFormatError, DatasetUnavailableError
from tf_transformer.data.pipeline import make_batches, padded_batches, padding_fraction
from tf_transformer.data.sources import canonical_split, load_corpus, load_dataset

__all__ = [
    "DataFormatError",
    "DatasetUnavailableError",
    "canonical_split",
    "load_corpus",
    "load_dataset",
    "make_batches",
    "padded_batches",
    "padding_fraction",
]
