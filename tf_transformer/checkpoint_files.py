"""A folder of checkpoints on disk: which are whole, newest first, and the fallback between them.

A checkpoint is `PREFIX.index` (which tensor lies where) and `PREFIX.data-*` (the tensors). A
full disk, a copy cut short or a crash of the machine can leave either one short or empty,
while the folder's `checkpoint` state file still names it. Restoring it then fails deep in
TensorFlow (`IndexError: Read less bytes than requested`). The check here is cheap (the index,
the data files' sizes and the small string tensors, not the weights) and runs once per
checkpoint a command opens; a restore that still fails is handled by its caller.

"Torn" means a short read, a size mismatch, a bad index or a failed checksum
(`is_torn_error`), nothing else. Any other error of TensorFlow's checkpoint reader (permission
denied, a file system that is not there) stops the command with `CheckpointReadError`, so that
`--resume` never goes back to an older checkpoint (and later saves over the newer one) because
of it; an error from anywhere else (a bug) keeps its type and traceback.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tf_transformer.errors import TransformerError, TransformerWarning


class TornCheckpointError(ValueError, TransformerError):
    """No whole checkpoint where one was needed (every candidate is torn or missing)."""


class CheckpointReadError(OSError, TransformerError):
    """A checkpoint could not be read for a reason other than being torn; nothing was passed
    over."""


# The module of TensorFlow's checkpoint reader (`tf.train.load_checkpoint`, and what
# `tf.train.Checkpoint.restore` reads the object graph with): its errors are raised there.
READER_MODULE = "tensorflow.python.training.py_checkpoint_reader"

# The reader's `IndexError` (the C++ status OUT_OF_RANGE) for a data file cut short; the
# `RestoreV2` op raises the same status as `tf.errors.OutOfRangeError`.
SHORT_READ = "Read less bytes than requested"

# The reader turns the table and bundle checks' `DATA_LOSS` statuses into a bare `OpError` of
# code UNKNOWN, so only its text tells them from permission denied (also UNKNOWN there). The
# `RestoreV2` op keeps the type: `tf.errors.DataLossError`.
BAD_FILE_MESSAGES = (
    "not an sstable",  # an index cut short ("bad magic number")
    "too short to be an sstable",  # an index being rewritten in place
    "truncated block read",  # an index block cut short
    "block checksum mismatch",  # a changed byte in the index
    "corrupted compressed block contents",
    "Checksum does not match",  # a changed byte in a data file
)


def raised_by_reader(error: BaseException) -> bool:
    """Whether TensorFlow's checkpoint reader raised `error` (the innermost frame of its
    traceback is in `READER_MODULE`)."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_globals.get("__name__") == READER_MODULE


def is_torn_error(error: BaseException) -> bool:
    """Whether a read error means a torn file: a short read, a bad index or a failed checksum,
    found by its type and where it was raised (any other `IndexError` or `OpError`: no)."""
    import tensorflow as tf

    if isinstance(error, tf.errors.DataLossError):
        return True
    if isinstance(error, tf.errors.OutOfRangeError):
        return SHORT_READ in str(error)
    if not raised_by_reader(error):
        return False
    if isinstance(error, IndexError):
        return SHORT_READ in str(error)
    return (
        isinstance(error, tf.errors.OpError)
        and error.error_code == tf.errors.UNKNOWN
        and any(m in str(error) for m in BAD_FILE_MESSAGES)
    )


def torn_reason(prefix: str, error: BaseException) -> str | None:
    """The first line of `error` when it means a torn checkpoint; None when it is no read error
    of the checkpoint (the caller re-raises it). Any other error of the reader raises
    `CheckpointReadError`, which stops the command."""
    import tensorflow as tf

    if is_torn_error(error):
        return first_line(error)
    if not (isinstance(error, tf.errors.OpError) and raised_by_reader(error)):
        return None
    raise CheckpointReadError(
        f"cannot read the checkpoint {prefix}: {first_line(error)}; no older checkpoint is "
        "used in its place and nothing was overwritten. Fix its files' access, then run again."
    ) from error


def checkpoint_problem(prefix: str | Path) -> str | None:
    """Why the checkpoint at `prefix` cannot be read whole; None when it can.

    Reads the index, sums the bytes its numeric tensors need, compares that with the data
    files, and reads the string tensors (the object graph, written last: a data file cut
    anywhere fails there).
    """
    import tensorflow as tf

    prefix = str(prefix)
    index = Path(prefix + ".index")
    if not index.is_file():
        return f"no index file {index.name}"
    if index.stat().st_size == 0:
        return f"its index file {index.name} is empty"
    data = sorted(Path(prefix).parent.glob(Path(prefix).name + ".data-*"))
    if not data:
        return f"no data file {Path(prefix).name}.data-*"
    # Only the reader's calls are in the `try`s: an error of the arithmetic is a bug.
    try:
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
        shapes = reader.get_variable_to_shape_map()
    except (IndexError, tf.errors.OpError) as error:
        if (reason := torn_reason(prefix, error)) is None:
            raise
        return f"its index is unreadable: {reason}"
    strings = [key for key, dtype in dtypes.items() if dtype == tf.string]
    try:
        values = [reader.get_tensor(key) for key in strings]
    except (IndexError, tf.errors.OpError) as error:
        if (reason := torn_reason(prefix, error)) is None:
            raise
        return f"its data is unreadable: {reason}"
    needed = sum(len(v) for value in values for v in np.asarray(value, dtype=object).ravel())
    for key, dtype in dtypes.items():
        if dtype != tf.string:
            needed += int(np.prod(shapes[key], dtype=np.int64)) * dtype.size
    held = sum(path.stat().st_size for path in data)
    if held < needed:
        return f"its data files hold {held} bytes of the {needed} its index lists"
    return None


def first_line(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    return text.strip().splitlines()[0]


def checkpoint_number(prefix: str) -> int:
    """The number ending a checkpoint prefix (`ckpt-1200`: 1200); -1 when there is none."""
    match = re.search(r"-(\d+)$", prefix)
    return int(match[1]) if match else -1


def checkpoint_candidates(folder: str | Path) -> list[str]:
    """The checkpoint prefixes in `folder`, newest (highest number) first: those its state file
    lists; every `*.index` there only when the state file is missing or damaged.

    A checkpoint that the state file does not name yet may still be being written by a trainer
    (its index appears before the state file is replaced), so it is no candidate while the
    state file can be read: a reader beside a trainer never calls it torn.
    """
    import tensorflow as tf

    folder = Path(folder)
    if not folder.is_dir():
        return []
    try:
        state = tf.train.get_checkpoint_state(str(folder))
    except (ValueError, OSError, tf.errors.OpError):  # a damaged state file: the files decide
        state = None
    if state is not None:
        listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
        found = {str(folder / Path(path).name) for path in listed if path}
    else:
        found = {str(path.with_suffix("")) for path in folder.glob("*.index")}
    return sorted(found, key=checkpoint_number, reverse=True)


def torn_note(prefix: str, load: Callable[[str], Any] | None = None) -> str | None:
    """ "PREFIX is torn (why)" when the checkpoint is not whole, else None.

    Args:
      load: also reads the checkpoint (e.g. `tf.train.Checkpoint.restore`) once the cheap
        check passes; a torn read there (a changed byte: a checksum) counts as torn too, and any
        other error it raises is raised (a reader's as `CheckpointReadError`).
    """
    import tensorflow as tf

    problem = checkpoint_problem(prefix)
    if problem is None and load is not None:
        try:
            load(prefix)
        except (IndexError, tf.errors.OpError) as error:
            if (reason := torn_reason(prefix, error)) is None:
                raise  # not a read of the checkpoint's files: a bug, or a model that differs
            problem = f"it does not restore: {reason}"
    return None if problem is None else f"{prefix} is torn ({problem})"


def newest_intact(
    folder: str | Path, notes: list[str], load: Callable[[str], Any] | None = None
) -> str | None:
    """The newest whole checkpoint in `folder` (None: none), appending a `torn_note` to
    `notes` for each newer one passed over; `load` as in `torn_note`."""
    for prefix in checkpoint_candidates(folder):
        note = torn_note(prefix, load)
        if note is None:
            return prefix
        notes.append(note)
    return None


def report_fallback(notes: list[str], using: str) -> None:
    """Warns in one line, when `notes` says something was passed over, what is used instead."""
    if notes:
        warnings.warn(f"{'; '.join(notes)}; {using}", TransformerWarning, stacklevel=3)
