"""Decoding: the search strategies over the `logits_fn(ids, step, cache)` seam (`search` holds
the seam and what they share; `greedy`, `beam`), and `cached_decode`, which drives a
`Transformer` through that seam with its key/value cache."""

from tf_transformer.moved import moved_name


def __getattr__(name: str):
    # `tf_transformer.inference.decoding` was the model adapter's module (`.cached_decode`).
    return moved_name(__name__, name)
