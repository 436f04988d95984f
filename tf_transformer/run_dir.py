"""The run directory: everything needed to resume, translate, evaluate and export a run.

Layout::

    runs/NAME/
      config.json     {"model": ModelConfig fields, "train": training settings, "data": ...}
      tokenizers/     the Tokenizers SavedModel
      checkpoints/    tf.train.CheckpointManager files (model, optimizer, step, data position)
        averaged/     the average of the last N checkpoints (model only), when asked for
        best/         the best by dev BLEU (model only) and best.json, with --eval-every
      logs/           TensorBoard event files

Translating, evaluating and exporting use the best checkpoint, else the averaged one, else the
latest, passing over torn ones (`RunDir.checkpoint`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tf_transformer.config import ModelConfig
from tf_transformer.errors import MissingFileError

# The checkpoints a run can hold, in the order a run is read by default (see `RunDir.checkpoint`).
CHECKPOINT_NAMES = ("best", "averaged", "latest")


class RunDir:
    """Paths and loaders of one run directory."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @classmethod
    def of(cls, run_dir: str | os.PathLike | RunDir) -> RunDir:
        """`run_dir` as a `RunDir`: itself when it is one (the entry points resolve a path once,
        and pass the `RunDir` on)."""
        return run_dir if isinstance(run_dir, RunDir) else cls(run_dir)

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def tokenizers_path(self) -> Path:
        return self.root / "tokenizers"

    @property
    def checkpoints_path(self) -> Path:
        return self.root / "checkpoints"

    @property
    def averaged_path(self) -> Path:
        return self.checkpoints_path / "averaged"

    @property
    def best_path(self) -> Path:
        return self.checkpoints_path / "best"

    @property
    def best_record_path(self) -> Path:
        return self.best_path / "best.json"

    @property
    def logs_path(self) -> Path:
        return self.root / "logs"

    def exists(self) -> bool:
        return self.config_path.is_file()

    def read_config(self) -> dict[str, Any]:
        if not self.config_path.is_file():
            raise MissingFileError(
                f"{self.root} is not a run directory (no config.json); train one with "
                "`tf-transformer train --run-dir DIR`."
            )
        return json.loads(self.config_path.read_text())

    def write_config(self, config: dict[str, Any]) -> None:
        """Writes config.json atomically (a crash or a full disk leaves the old file or the new
        one; `atomic_files.WriteError` says which)."""
        from tf_transformer.atomic_files import write_json

        write_json(self.config_path, config)

    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.read_config()["model"])

    def train_config(self):
        """The run's `TrainConfig` (defaults when config.json has no "train" entry)."""
        from tf_transformer.config import TrainConfig

        return TrainConfig.from_dict(self.read_config().get("train", {}))

    def checkpoint_folder(self, name: str) -> Path:
        """The folder of the checkpoints named `name`: "best", "averaged" or "latest"."""
        folders = {"best": self.best_path, "averaged": self.averaged_path}
        return folders.get(name, self.checkpoints_path)

    def data_config(self):
        """The run's `DataConfig` (None when config.json records no dataset)."""
        from tf_transformer.config import DataConfig

        recorded = self.read_config().get("data") or {}
        return DataConfig.from_dict(recorded) if recorded.get("dataset") else None

    def latest_checkpoint(self, which: str | None = None) -> str | None:
        """A checkpoint prefix: the latest training one, or `which` = "best", "averaged",
        "latest" or a prefix (returned as is); None when the run has no such checkpoint.

        This is what the folder's state file names, whole or not; `checkpoint` checks.
        """
        import tensorflow as tf

        if which not in (None, *CHECKPOINT_NAMES):
            return which
        return tf.train.latest_checkpoint(str(self.checkpoint_folder(which or "latest")))

    def checkpoint(self, which: str | None = None) -> tuple[str, str]:
        """`(name, prefix)` of the checkpoint to read: the best one (by dev BLEU), else the
        averaged one, else the newest whole one of training; `which` starts that order later.

        A torn checkpoint (`checkpoint_files.checkpoint_problem`) is passed over for the next
        older one of its folder, then for the next folder, and so is a missing folder that
        `which` names; a `TransformerWarning` says which were passed over and what is used.

        Args:
          which: None, "best", "averaged", "latest" or a checkpoint prefix (named "given",
            used only when whole).

        Raises:
          FileNotFoundError: the run has no checkpoint at all.
          TornCheckpointError: it has some, and none is whole (or the given one is torn).
        """
        from tf_transformer.checkpoint_files import (
            TornCheckpointError,
            newest_intact,
            report_fallback,
        )

        if which not in (None, *CHECKPOINT_NAMES):
            from tf_transformer.checkpoint_files import checkpoint_problem

            problem = checkpoint_problem(which)
            if problem is not None:
                raise TornCheckpointError(f"cannot read the checkpoint {which}: {problem}.")
            return "given", which
        notes: list[str] = []  # what was passed over, in order
        torn = 0
        for name in CHECKPOINT_NAMES[CHECKPOINT_NAMES.index(which or "best") :]:
            folder = self.checkpoint_folder(name)
            before = len(notes)
            path = newest_intact(folder, notes)
            torn += len(notes) - before
            if path is not None:
                report_fallback(notes, f"using the {name} checkpoint {path}")
                return name, path
            if name == which and len(notes) == before:
                notes.append(f"there is no {name} checkpoint in {folder}")
        if not torn:
            raise MissingFileError(f"No checkpoint in {self.checkpoints_path}.")
        raise TornCheckpointError(
            f"no whole checkpoint in {self.checkpoints_path}: {'; '.join(notes)}. Train the run "
            "again (--overwrite)."
        )

    def best_record(self) -> dict[str, Any] | None:
        """best.json: step and dev scores of the best checkpoint (None when none is kept)."""
        if not self.best_record_path.is_file():
            return None
        return json.loads(self.best_record_path.read_text())

    def load_tokenizers(self):
        from tf_transformer.text.tokenizers import load_tokenizers

        if not self.tokenizers_path.is_dir():
            raise MissingFileError(f"No tokenizers in {self.tokenizers_path}.")
        return load_tokenizers(str(self.tokenizers_path))

    def load_model(self, checkpoint: str | None = None):
        """The Transformer with the weights of `checkpoint`.

        Args:
          checkpoint: None for the default (best, else averaged, else latest; see
            `checkpoint`), "best" (written with --eval-every), "averaged" (written by
            `--average-last N`), "latest" (the last training checkpoint) or a prefix.
        """

        from tf_transformer.model import Transformer

        model = Transformer.from_config(self.model_config())
        model.build()
        _, path = self.checkpoint(checkpoint)
        from tf_transformer.weights import model_checkpoint

        status = model_checkpoint(model).restore(path).expect_partial()
        status.assert_existing_objects_matched()
        return model
