"""Moved to `tf_transformer.inference.translator` (temporary alias while the package is restructured)."""

from tf_transformer.inference.translator import *  # noqa: F401,F403
