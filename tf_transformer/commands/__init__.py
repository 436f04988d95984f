"""Subcommands of the `tf-transformer` CLI, one module each (see `tf_transformer.cli`)."""

from __future__ import annotations

import argparse
import contextlib
import sys

# DEFAULT_MODEL_NAME: the name `export` files a model under (saved_models/<name>/<version>) and
# the name `translate --server` asks TF Serving for, so an export serves at once.
from tf_transformer.backends.savedmodel.server import DEFAULT_MODEL_NAME
from tf_transformer.commands.flags import (
    add_config_flags,
    config_changes,
    positive_float,
    positive_int,
)
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import CLIError, TransformerError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "positive_float",
    "positive_int",
]  # argparse types the commands import from here


# --checkpoint of translate, evaluate and export (the choice is `RunDir.checkpoint`).
CHECKPOINT_HELP = (
    "best|averaged|latest|PREFIX: the best by dev BLEU (train --eval-every), the average of "
    "the last N (--average-last), the last one, or a checkpoint prefix (default: best, else "
    "averaged, else latest)."
)


def add_decoding_arguments(parser: argparse.ArgumentParser, exported: str) -> None:
    """The `DecodeConfig` flags (--beam-size, --length-penalty, --max-source-tokens,
    --max-new-tokens).

    Args:
      exported: what a SavedModel or server does with them, for the help text.
    """
    group = parser.add_argument_group("decoding", exported)
    add_config_flags(group, DecodeConfig)


def decode_config(args: argparse.Namespace) -> DecodeConfig:
    """The decoding flags as the `DecodeConfig` a command passes on (None: not given)."""
    return DecodeConfig(**config_changes(args, DecodeConfig))


@contextlib.contextmanager
def model_loading(path):
    """Turns TensorFlow's errors for an unreadable SavedModel or checkpoint into a `CLIError`
    naming `path` (one line, exit 2); FileNotFoundError, PermissionError and the package's own
    errors (a torn checkpoint, a failed write) pass unchanged.

    TensorFlow is not imported here: a wrong path fails before it loads.
    """
    try:
        yield
    except (FileNotFoundError, PermissionError, TransformerError):  # already one clear line
        raise
    except Exception as error:
        unreadable = [OSError]
        tf = sys.modules.get("tensorflow")  # loaded by whatever raised a TensorFlow error
        if tf is not None:
            unreadable += [tf.errors.NotFoundError, tf.errors.DataLossError]
        if not isinstance(error, tuple(unreadable)):
            raise
        raise CLIError(f"cannot load the model in {path}: {error}") from error
