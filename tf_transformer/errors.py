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


class DeprecatedName(TransformerWarning, FutureWarning):
    """An old flag or config.json key, still read: said once, with the name to use."""
