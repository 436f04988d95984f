"""The package's base exception: every error a user can act on derives from `TransformerError`.

The concrete classes keep a builtin base as well (`DataFormatError` is a `ValueError`,
`DatasetUnavailableError` a `RuntimeError`, `NonFiniteLossError` a `FloatingPointError`), so
code that catches the builtin keeps working; the CLI catches `TransformerError` and prints one
line.
"""


class TransformerError(Exception):
    """Base class of the errors raised by `tf_transformer` for a user to act on."""


class TransformerWarning(UserWarning):
    """Something a user should know that did not stop the command (e.g. a torn checkpoint was
    skipped); the CLI prints it as one line."""


class CLIError(TransformerError):
    """A command-line mistake (conflicting flags, a run directory in the way): the CLI prints
    it as one line and exits with code 2."""


# The builtin kinds a `raise` of the package uses for what a user gave or must fix: a bad value,
# a missing path, a path in the way, a file that cannot be read. The CLI tells them from the same
# builtins raised elsewhere (inside numpy, TensorFlow: a bug, with its traceback) by these types.


class InvalidValueError(ValueError, TransformerError):
    """A value the package refuses (a flag, a config field, a file's contents, a model or
    export that does not fit the request); the message says which and what to do."""


class MissingFileError(FileNotFoundError, TransformerError):
    """A file or directory a command was given, or that a run or export should hold, is not
    there."""


class PathExistsError(FileExistsError, TransformerError):
    """Something is already where a command would write; it is never overwritten."""


class UnreadableFileError(OSError, TransformerError):
    """A file is there but cannot be read (permission denied, an I/O error); the message names
    it and the cause."""
