"""Moved to `tf_transformer.inference.load` (temporary alias while the package is restructured)."""

from tf_transformer.inference.load import *  # noqa: F401,F403
