"""What one validation found (`Evaluation`), and the best checkpoint it may replace
(`BestCheckpoint`: `checkpoints/best/`, best.json, and the patience count)."""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from tf_transformer.atomic_files import write_json
from tf_transformer.inference.evaluate import Scores
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import save_model_checkpoint


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One validation of the current weights on the dev subset.

    Attributes:
      step: the optimizer step evaluated.
      bleu: cased BLEU (sacreBLEU's default, the headline); bleu_lc: lower-cased; chrf: chrF.
      seconds: wall time of the evaluation (translating, scoring, the best checkpoint, the
        summaries); it is spent inside the training budget.
      best_step, best_bleu: the best evaluation so far (this one when `best_step == step`).
      since_best: evaluations since the best one without a better score.
      stop: `since_best` reached the patience: the loop stops.
    """

    step: int
    bleu: float
    bleu_lc: float
    chrf: float
    seconds: float
    best_step: int
    best_bleu: float
    since_best: int = 0
    stop: bool = False
    others: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        """`eval 12.3 s at step 500: BLEU 21.4 chrF 45.1 (best so far)`."""
        if self.best_step == self.step:
            best = "best so far"
        else:
            best = f"best {self.best_bleu:.1f} at step {self.best_step}"
        if self.stop:
            best += f"; stopping: no better BLEU in {self.since_best} evaluations"
        others = "".join(f"; {name} BLEU {bleu:.1f}" for name, bleu in self.others.items())
        return (
            f"eval {self.seconds:.1f} s at step {self.step}: BLEU {self.bleu:.1f} "
            f"chrF {self.chrf:.1f}{others} ({best})"
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class BestCheckpoint:
    """Keeps the model weights of the best evaluation in `run.best_path` (`checkpoints/best/`).

    Better means a higher cased BLEU, or the same BLEU and a higher chrF (the first evaluations
    of a run often all score BLEU 0). Only the model is written, as `model_checkpoint(model)`
    (like `checkpoints/averaged/`), so `RunDir.load_model("best")` restores it. `best.json`
    beside it records the best evaluation (step, scores, checkpoint) and the evaluations since
    then, so a resumed run carries on with the same record and the same patience count.

    Args:
      run: the run directory.
      patience: stop after this many evaluations without a better score (None: never).
    """

    def __init__(self, run: RunDir, *, patience: int | None = None):
        self.run = run
        self.patience = patience
        self.record = run.best_record()

    def is_better(self, scores: Scores) -> bool:
        if self.record is None:
            return True
        return (scores.bleu, scores.chrf) > (self.record["bleu"], self.record["chrf"])

    def update(
        self,
        model: tf.keras.Model,
        step: int,
        scores: Scores,
        *,
        source: str | None = None,
        dev_sets: dict[str, Scores] | None = None,
    ) -> dict:
        """Records the evaluation of `model` at `step`; saves its weights if it is the best.

        Args:
          source: what the weights are when not the training weights at `step` (e.g. "averaged
            last 5"); recorded as `"source"`. Such an evaluation does not count towards the
            patience.
          dev_sets: with several dev sets, every set's scores (the first is `scores`), recorded
            as `"dev_sets": {name: {"bleu", "bleu_lc", "chrf", "num_sentences"}}` and
            `"picked_by"` (the first name).

        Returns:
          The record: `{"step", "bleu", "bleu_lc", "chrf", "num_sentences", "checkpoint",
          "evaluations_since"}` (and `"source"`) of the best evaluation so far.
        """
        if self.is_better(scores):
            path = save_model_checkpoint(model, self.run.best_path, step)
            self.record = {
                "step": int(step),
                "bleu": scores.bleu,
                "bleu_lc": scores.bleu_lc,
                "chrf": scores.chrf,
                "num_sentences": scores.num_sentences,
                "checkpoint": os.path.basename(path),
                "evaluations_since": 0,
            }
            if source is not None:
                self.record["source"] = source
            if dev_sets:
                self.record["picked_by"] = next(iter(dev_sets))
                self.record["dev_sets"] = {
                    name: {
                        "bleu": each.bleu,
                        "bleu_lc": each.bleu_lc,
                        "chrf": each.chrf,
                        "num_sentences": each.num_sentences,
                    }
                    for name, each in dev_sets.items()
                }
        elif source is None:
            self.record["evaluations_since"] += 1
        self._write_record()
        return self.record

    def out_of_patience(self) -> bool:
        since = 0 if self.record is None else self.record["evaluations_since"]
        return self.patience is not None and since >= self.patience

    def _write_record(self) -> None:
        """Writes best.json atomically (a crash leaves the old record or the new one)."""
        write_json(self.run.best_record_path, self.record)
