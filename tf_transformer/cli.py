"""The `tf-transformer` command line: a thin face over the package.

Each subcommand lives in `tf_transformer/commands/<name>.py` and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.
Errors a user can fix end as one line on stderr with exit code 2: bad flags (argparse) and
any `tf_transformer.errors.TransformerError` (`is_user_error`): `CLIError`, the package's
`InvalidValueError`, `MissingFileError`, `PathExistsError` and `UnreadableFileError` (what its
`raise` statements use for bad values and paths), and the data, training and serving errors.
They are told apart by type: anything else (from TensorFlow, or a bug of ours: a ValueError
inside numpy) is not the user's to fix, and shows its traceback.
TensorFlow's C++ log lines are left out unless the user sets `TF_CPP_MIN_LOG_LEVEL`
(`native_logs`).
"""

from __future__ import annotations

import argparse
import gc
import sys
import warnings

# The command modules import neither TensorFlow nor the training code at import time (each
# `run` imports what it needs), so building the parser stays fast and a bad flag fails at once.
from tf_transformer.commands import evaluate, export, serve, train, translate
from tf_transformer.errors import TransformerError, TransformerWarning
from tf_transformer.native_logs import set_log_level, tensorflow_import_held

COMMANDS = {
    "train": train,
    "translate": translate,
    "evaluate": evaluate,
    "export": export,
    "serve": serve,
}


# Tracing a model's functions makes many short-lived Python objects, and the default collector
# (a pass every 700 new objects) walks them again and again. As a program, the CLI collects 70
# times less often: `train --preset tiny --max-steps 30` on 3,000 pairs took 8.5 CPU-s instead
# of 9.0 (median of 5 runs each). The test processes use the same (tests/conftest.py).
TRACING_GC_THRESHOLD = (50_000, 20, 100)


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is ours to report in one line: a `TransformerError`, by its type (the
    package raises its own subclasses of ValueError and OSError for a bad value or path)."""
    return isinstance(error, TransformerError)


def usage_error(prog: str, message: str):
    """Exits 2 with one line: `PROG: error: MESSAGE (see PROG --help)`."""
    print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
    sys.exit(2)


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line (no usage block), exit code 2."""

    def error(self, message: str):
        usage_error(self.prog, message)


class CommandParser(ArgumentParser):
    """A subcommand's parser: reads --help last, so flags that shape the help apply whatever
    their place (`train --help --preset small-data` shows small-data's defaults)."""

    def parse_known_args(self, args=None, namespace=None):
        if args is not None and "--" not in args:
            helps = [arg for arg in args if arg in ("-h", "--help")]
            args = [arg for arg in args if arg not in helps] + helps
        return super().parse_known_args(args, namespace)


def one_line(error: BaseException) -> str:
    """The error's message on one line (a multi-line message is joined with spaces)."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text or type(error).__name__


def _warning_printer(command: str | None, show):
    """A `warnings.showwarning` that prints a `TransformerWarning` as
    `tf-transformer COMMAND: warning: MESSAGE` and passes any other warning to `show`."""
    prefix = f"tf-transformer {command}" if command else "tf-transformer"

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, TransformerWarning):
            return show(message, category, filename, lineno, file, line)
        print(f"{prefix}: warning: {one_line(message)}", file=sys.stderr)

    return show_warning


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tf-transformer",
        description="Train, translate with, evaluate and export a Portuguese->English Transformer.",
    )
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )
    for module in COMMANDS.values():
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command: `argv` (default: the program's arguments, and then, as the program,
    with fewer garbage collections: `TRACING_GC_THRESHOLD`). Returns the exit code.

    TensorFlow logs at `TF_CPP_MIN_LOG_LEVEL` 3 (FATAL only) unless the variable is set; when
    a command imports it, the lines its libraries print as they load are held to that level
    (`native_logs`).
    """
    set_log_level()
    if argv is None:  # the program itself (`tf-transformer`, `python -m tf_transformer.cli`)
        gc.set_threshold(*TRACING_GC_THRESHOLD)
        argv = sys.argv[1:]
    # The command, for the warning lines: the top-level parser takes no option but --help.
    command = argv[0] if argv and argv[0] in COMMANDS else None
    with warnings.catch_warnings(), tensorflow_import_held():
        warnings.simplefilter("always", TransformerWarning)  # the package's, one line each
        warnings.showwarning = _warning_printer(command, warnings.showwarning)
        return _run(build_parser(), argv)


def _run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    # argparse (3.11) cannot match positionals that come after an option when the command also
    # has optional positionals (`translate RUN --beam-size 1 "frase"`); a command that names
    # such a list in `extra_positionals` gets those leftovers, anything else is still an error.
    args, extras = parser.parse_known_args(argv)
    field = getattr(args, "extra_positionals", None)
    if extras and (field is None or any(e.startswith("-") for e in extras)):
        usage_error(f"{parser.prog} {args.command}", f"unrecognized arguments: {' '.join(extras)}")
    if extras:
        setattr(args, field, [*getattr(args, field), *extras])
    try:
        return int(args.func(args) or 0)
    except Exception as error:  # narrowed by is_user_error: anything else is re-raised
        if not is_user_error(error):
            raise
        print(f"tf-transformer {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tf-transformer {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
