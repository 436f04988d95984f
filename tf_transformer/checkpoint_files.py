"""A folder of checkpoints on disk: which are whole, newest first, and the fallback between them.

A checkpoint is `PREFIX.index` (which tensor lies where) and `PREFIX.data-*` (the tensors). A
full disk, a copy cut short or a crash of the machine can leave either one short or empty,
while the folder's `checkpoint` state file still names it. Restoring it then fails deep in
TensorFlow (`IndexError: Read less bytes than requested`). The check here is cheap (the index,
the data files' sizes and the small string tensors, not the weights) and runs once per
checkpoint a command opens; a restore that still fails is handled by its caller.
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
    except (ValueError, OSError, tf.errors.OpError) as error:
        return f"its index is unreadable: {first_line(error)}"
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
    except (IndexError, ValueError, OSError, tf.errors.OpError) as error:
        return f"its data is unreadable: {first_line(error)}"
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
    lists and any other `*.index` there (the state file itself may be damaged)."""
    import tensorflow as tf

    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = {str(path.with_suffix("")) for path in folder.glob("*.index")}
    try:
        state = tf.train.get_checkpoint_state(str(folder))
    except (ValueError, OSError, tf.errors.OpError):  # a damaged state file: the files decide
        state = None
    if state is not None:
        listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
        found |= {str(folder / Path(path).name) for path in listed if path}
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
            problem = f"it does not restore: {first_line(error)}"
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
