"""Validation while training: dev BLEU and chrF by greedy decoding, and the best checkpoint.

Every `eval_every` steps the training loop saves a checkpoint and calls a `Validator` with the
current model. It translates a fixed dev subset (the first `eval_sentences` validation pairs)
with the inference `Translator` (beam size 1, batched), scores it with
`tf_transformer.inference.evaluate` (cased BLEU, the headline; lower-cased BLEU; chrF), writes
the scores and a few sample translations to the default `tf.summary` writer (the loop's
`logs/validation`), and hands the scores to `BestCheckpoint`, which keeps the weights of the best
evaluation in `checkpoints/best/` and counts the evaluations since (`patience`).

A run may validate on several named dev sets (`DataConfig.dev_set`): each is scored at every
evaluation and written as `bleu/NAME` and `chrf/NAME`; the first one's scores are the headline
(`bleu`, `chrf`) and alone pick the best checkpoint and count the patience, so "best" keeps one
meaning; best.json records every set's scores of the best evaluation under `"dev_sets"`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import tensorflow as tf

from tf_transformer.config import DecodeConfig, TrainConfig
from tf_transformer.errors import InvalidValueError
from tf_transformer.inference.evaluate import Scores, evaluate
from tf_transformer.inference.translator import Translator
from tf_transformer.run_dir import RunDir
from tf_transformer.training.best_checkpoint import BestCheckpoint, Evaluation
from tf_transformer.training.logs import write_scalar
from tf_transformer.training.step.build import build_model

# Sample translations written to TensorBoard at each evaluation: the first pairs of the subset.
NUM_SAMPLES = 3


class Validator:
    """Scores a model on a fixed dev subset with batched greedy decoding; the loop's hook.

    Calling it translates the source side of `pairs` with a `Translator` (beam size 1) on the
    model's current weights, scores the translations with `inference.evaluate`, updates `best`,
    and writes to the default `tf.summary` writer the scalars `bleu`, `bleu_lc`, `chrf` and
    `eval_seconds` and the text summary `samples` (source, reference and hypothesis of the first
    `num_samples` pairs).

    Args:
      pairs: the dev subset, `(source, reference)` strings.
      tokenizers: the run's `Tokenizers`.
      best: where the best weights go, and the patience (None: nothing is kept).
      max_tokens: most source tokens kept and tokens generated (bounded by the model's table).
      batch_size: sentences per decoding batch.
      num_samples: sample translations written per evaluation.
      others: further named dev sets, `{name: pairs}`, scored at each evaluation beside
        `pairs` (named `name`), which alone picks the best checkpoint.
      name: the name of `pairs` when there are `others`.

    Example:
      >>> validator = Validator(pairs[:300], tokenizers, best=BestCheckpoint(run))
      >>> with writer.as_default():
      ...     print(validator(model, step).line())
      eval 12.3 s at step 500: BLEU 21.4 chrF 45.1 (best so far)
    """

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        tokenizers,
        *,
        best: BestCheckpoint | None = None,
        max_tokens: int = 128,
        batch_size: int = 64,
        num_samples: int = NUM_SAMPLES,
        others: dict[str, Sequence[tuple[str, str]]] | None = None,
        name: str = "dev",
    ):
        if not pairs or not all(others.values() if others else [True]):
            raise InvalidValueError("No validation pairs to evaluate on.")
        self.others = {key: list(value) for key, value in (others or {}).items()}
        self.name = name
        self.pairs = list(pairs)
        self.tokenizers = tokenizers
        self.best = best
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.num_samples = num_samples
        self._translator: Translator | None = None

    @classmethod
    def for_run(
        cls,
        run: RunDir,
        pairs: tf.data.Dataset | dict[str, tf.data.Dataset],
        tokenizers,
        train_config: TrainConfig,
    ) -> Validator:
        """The validator of a training run: the first `eval_sentences` of `pairs` (of each dev
        set, when `pairs` is `{name: pairs}`; the first picks the best checkpoint), the best
        checkpoint in `run` with `train_config.patience`, decoding capped at `max_tokens`."""
        sets = pairs if isinstance(pairs, dict) else {"dev": pairs}
        subsets = {
            name: [
                (source.decode("utf-8"), target.decode("utf-8"))
                for source, target in each.take(train_config.eval_sentences).as_numpy_iterator()
            ]
            for name, each in sets.items()
        }
        name, *others = subsets
        return cls(
            subsets[name],
            tokenizers,
            best=BestCheckpoint(run, patience=train_config.patience),
            max_tokens=train_config.max_tokens,
            others={other: subsets[other] for other in others},
            name=name,
        )

    def translator(self, model: tf.keras.Model) -> Translator:
        """A greedy Translator with `model`'s current weights.

        It decodes a float32 copy of `model`, built (and traced) once, into which each call
        copies the weights: a mixed-precision model decodes like the float32 model that
        `RunDir.load_model` restores (CPUs have no float16 batched matmul), and a model
        trained under a distribution strategy like a plain one.
        """
        if self._translator is None:
            copy = build_model(model.config)
            max_tokens = min(self.max_tokens, copy.config.max_length)
            config = DecodeConfig(
                beam_size=1, max_source_tokens=max_tokens, max_new_tokens=max_tokens
            )
            self._translator = Translator(self.tokenizers, copy, config)
        for target, source in zip(self._translator.model.weights, model.weights, strict=True):
            target.assign(source)
        return self._translator

    def score(self, model: tf.keras.Model) -> tuple[Scores, list[str]]:
        """Translates the subset with `model` and scores it; returns the scores and hypotheses."""
        translate = self.translator(model).translate_batch
        return evaluate(translate, self.pairs, batch_size=self.batch_size, progress=False)

    def offer(self, model: tf.keras.Model, step: int, source: str) -> Evaluation | None:
        """Scores other weights than the loop's (the averaged checkpoint at the end of a run)
        and keeps them as the best if they score higher; writes `bleu_<source>` and
        `chrf_<source>` scalars at `step` (spaces become underscores). None without `best`."""
        if self.best is None:
            return None
        started = time.perf_counter()
        scores, _ = self.score(model)
        by_set = self.by_set(model, scores)
        record = self.best.update(model, step, scores, source=source, dev_sets=by_set)
        tag = source.split()[0]
        write_scalar(f"bleu_{tag}", scores.bleu, step)
        write_scalar(f"chrf_{tag}", scores.chrf, step)
        return Evaluation(
            step=int(step),
            bleu=scores.bleu,
            bleu_lc=scores.bleu_lc,
            chrf=scores.chrf,
            seconds=time.perf_counter() - started,
            best_step=record["step"],
            best_bleu=record["bleu"],
            since_best=record["evaluations_since"],
        )

    def by_set(self, model: tf.keras.Model, scores: Scores) -> dict[str, Scores] | None:
        """With `others`: every dev set's scores by name, the first set's being `scores`
        (already computed); each other set translated with `model`. None without `others`."""
        if not self.others:
            return None
        translate = self.translator(model).translate_batch
        return {
            self.name: scores,
            **{
                name: evaluate(translate, pairs, batch_size=self.batch_size, progress=False)[0]
                for name, pairs in self.others.items()
            },
        }

    def __call__(self, model: tf.keras.Model, step: int) -> Evaluation:
        started = time.perf_counter()
        scores, hypotheses = self.score(model)
        by_set = self.by_set(model, scores)
        record = (
            None if self.best is None else self.best.update(model, step, scores, dev_sets=by_set)
        )
        seconds = time.perf_counter() - started
        for name in ("bleu", "bleu_lc", "chrf"):
            write_scalar(name, getattr(scores, name), step)
        for set_name, each in (by_set or {}).items():
            write_scalar(f"bleu/{set_name}", each.bleu, step)
            write_scalar(f"chrf/{set_name}", each.chrf, step)
        write_scalar("eval_seconds", seconds, step)
        samples = [
            [source, reference, hypothesis]
            for (source, reference), hypothesis in zip(self.pairs, hypotheses)
        ][: self.num_samples]
        table = tf.constant([["source", "reference", "hypothesis"], *samples])
        tf.summary.text("samples", table, step=step)
        return Evaluation(
            step=int(step),
            bleu=scores.bleu,
            bleu_lc=scores.bleu_lc,
            chrf=scores.chrf,
            seconds=seconds,
            best_step=int(step) if record is None else record["step"],
            best_bleu=scores.bleu if record is None else record["bleu"],
            since_best=0 if record is None else record["evaluations_since"],
            stop=self.best is not None and self.best.out_of_patience(),
            others={name: each.bleu for name, each in (by_set or {}).items() if name != self.name},
        )
