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


def add_decoding_arguments(parser: argparse.ArgumentParser, exported: str) -> None:
    """--beam-size, --length-penalty, --max-source-tokens, --max-new-tokens (and --max-length,
    both caps) with `DecodeConfig`'s defaults, the one place they are defined.

    Args:
      exported: what a SavedModel or server does with them, for the help text.
    """
    from tf_transformer.config import DecodeConfig

    default = DecodeConfig()
    group = parser.add_argument_group("decoding", exported)
    group.add_argument(
        "--beam-size",
        type=positive_int,
        default=None,
        help=f"Beams per sentence; 1 = greedy (default: {default.beam_size}).",
    )
    group.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        metavar="ALPHA",
        help=f"GNMT length-penalty exponent of beam search (default: {default.length_penalty}).",
    )
    caps = f"(default: min({DecodeConfig.DEFAULT_LENGTH}, the model's max_length))"
    group.add_argument(
        "--max-source-tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"Source tokens kept per sentence, START/END included {caps}.",
    )
    group.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"Most tokens generated per sentence, END included {caps}.",
    )
    group.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        metavar="N",
        help="Both caps at once (the earlier flag).",
    )


def decoding_settings(args: argparse.Namespace) -> dict:
    """The decoding flags given, as `DecodeConfig` fields (None: not given)."""
    caps = {"max_source_tokens": args.max_source_tokens, "max_new_tokens": args.max_new_tokens}
    if args.max_length is not None:
        caps = {name: args.max_length if value is None else value for name, value in caps.items()}
    return {"beam_size": args.beam_size, "length_penalty": args.length_penalty, **caps}


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
    naming `path` (one line, exit 2); FileNotFoundError, PermissionError and the package's own
    errors (a torn checkpoint, a failed write) pass unchanged.

    TensorFlow is not imported here: a wrong path fails before it loads.
    """
    from tf_transformer.cli import CLIError
    from tf_transformer.errors import TransformerError

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
