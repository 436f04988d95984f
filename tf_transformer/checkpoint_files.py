"""A folder of checkpoints on disk: which are whole, newest first, and the fallback between them.

A checkpoint is `PREFIX.index` (which tensor lies where) and `PREFIX.data-*` (the tensors). A
full disk, a copy cut short or a crash of the machine can leave either one short or empty,
while the folder's `checkpoint` state file still names it. Restoring it then fails deep in
TensorFlow (`IndexError: Read less bytes than requested`). The check here is cheap (the index,
the data files' sizes and the small string tensors, not the weights) and runs once per
checkpoint a command opens; a restore that still fails is handled by its caller.

"Torn" means a short read, a size mismatch or a failed checksum (`is_torn_error`), nothing
else: any other read error (permission denied, out of memory, a file system that is not there)
stops the command with `CheckpointReadError`, so that `--resume` never goes back to an older
checkpoint (and later saves over the newer one) because of it.
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


# What TensorFlow's checkpoint reader says (as an `OpError` of code UNKNOWN, or `DataLossError`)
# when a file is short or its bytes are wrong.
TORN_MESSAGES = (
    "Read less bytes than requested",  # a data file cut short
    "not an sstable",  # an index cut short ("bad magic number")
    "too short to be an sstable",  # an index being rewritten in place
    "Checksum does not match",  # a changed byte
    "corrupted",
    "truncated",
)


def is_torn_error(error: BaseException) -> bool:
    """Whether a read error means a torn file: a short read or a failed checksum."""
    import tensorflow as tf

    if isinstance(error, (IndexError, tf.errors.DataLossError)):
        return True
    return isinstance(error, tf.errors.OpError) and any(m in str(error) for m in TORN_MESSAGES)


def torn_or_raise(prefix: str, error: BaseException) -> str:
    """The first line of `error` when it means a torn checkpoint; otherwise raises
    `CheckpointReadError`, which stops the command."""
    if is_torn_error(error):
        return first_line(error)
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
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (IndexError, tf.errors.OpError) as error:
        return f"its index is unreadable: {torn_or_raise(prefix, error)}"
    try:
        dtypes = reader.get_variable_to_dtype_map()
        shapes = reader.get_variable_to_shape_map()
        needed = 0
        for key, dtype in dtypes.items():
            if dtype == tf.string:
                values = np.asarray(reader.get_tensor(key), dtype=object).ravel()
                needed += sum(len(value) for value in values)
            else:
                needed += int(np.prod(shapes[key], dtype=np.int64)) * dtype.size
    except (IndexError, tf.errors.OpError) as error:
        return f"its data is unreadable: {torn_or_raise(prefix, error)}"
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
        check passes; a read error there (a corrupt byte: a checksum) counts as torn too.
    """
    import tensorflow as tf

    problem = checkpoint_problem(prefix)
    if problem is None and load is not None:
        try:
            load(prefix)
        except (IndexError, tf.errors.OpError) as error:
            problem = f"it does not restore: {torn_or_raise(prefix, error)}"
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
