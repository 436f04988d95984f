"""Decoding: the search strategies over the `logits_fn(ids, step, cache)` seam (`search` holds
the seam and what they share; `greedy`, `beam`), and `cached_decode`, which drives a
`Transformer` through that seam with its key/value cache."""
