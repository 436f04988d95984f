"""Moved to `tf_transformer.inference.evaluate` (temporary alias while the package is restructured)."""

from tf_transformer.inference.evaluate import *  # noqa: F401,F403
