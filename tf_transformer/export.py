"""Moved to `tf_transformer.inference.export` (temporary alias while the package is restructured)."""

from tf_transformer.inference.export import *  # noqa: F401,F403
