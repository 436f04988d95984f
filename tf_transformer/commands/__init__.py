"""Subcommands of the `tf-transformer` CLI, one module each (see `tf_transformer.cli`)."""

from __future__ import annotations

import argparse
import contextlib
import sys

# The name `export` files a model under (saved_models/<name>/<version>) and the name
# `translate --server` asks TF Serving for: the same by default, so an export serves at once.
DEFAULT_MODEL_NAME = "transformer"

# --checkpoint of translate, evaluate and export (the choice is `RunDir.checkpoint`).
CHECKPOINT_HELP = (
    "best|averaged|latest|PREFIX: the best by dev BLEU (train --eval-every), the average of "
    "the last N (--average-last), the last one, or a checkpoint prefix (default: best, else "
    "averaged, else latest)."
)


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


@contextlib.contextmanager
def model_loading(path):
    """Turns TensorFlow's errors for an unreadable SavedModel or checkpoint into a `CLIError`
    naming `path` (one line, exit 2); FileNotFoundError and PermissionError pass unchanged.

    TensorFlow is not imported here: a wrong path fails before it loads.
    """
    from tf_transformer.cli import CLIError

    try:
        yield
    except (FileNotFoundError, PermissionError):
        raise
    except Exception as error:
        unreadable = [OSError]
        tf = sys.modules.get("tensorflow")  # loaded by whatever raised a TensorFlow error
        if tf is not None:
            unreadable += [tf.errors.NotFoundError, tf.errors.DataLossError]
        if not isinstance(error, tuple(unreadable)):
            raise
        raise CLIError(f"cannot load the model in {path}: {error}") from error
