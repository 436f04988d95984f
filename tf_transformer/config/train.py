"""`TrainConfig`: optimizer, schedule, batching and the loop's limits."""

from __future__ import annotations

import dataclasses

from tf_transformer.config.base import _check_unit_interval, _DictConfig, setting
from tf_transformer.errors import InvalidValueError


@dataclasses.dataclass(frozen=True)
class TrainConfig(_DictConfig):
    """Training settings: optimizer and schedule (paper §5.3–5.4), data, run-time options."""

    epochs: int | None = setting(
        20,
        "Stop after N passes over the training data (None: max_steps/max_minutes decide).",
        positive=True,
        metavar="N",
    )
    max_steps: int | None = setting(
        None,
        "Stop once the run has taken N optimizer steps in all (a resumed run counts its "
        "earlier steps).",
        positive=True,
        metavar="N",
    )
    max_minutes: float | None = setting(
        None,
        "Wall-clock budget of one train call, M minutes: save, average and stop once reached.",
        positive=True,
        metavar="M",
    )
    warmup_steps: int = setting(
        4000, "Linear warm-up steps of the learning-rate schedule.", positive=True
    )
    lr_scale: float = setting(1.0, "Constant factor on the paper's learning-rate schedule.")
    cooldown: float = setting(
        0.0,
        "Take the learning rate linearly to 0 over the last FRACTION of the budget (max_steps, "
        "max_minutes or epochs, whichever ends the run first; 0: off).",
        metavar="FRACTION",
    )
    beta_1: float = setting(0.9, "Adam beta_1.")
    beta_2: float = setting(0.98, "Adam beta_2.")
    epsilon: float = setting(1e-9, "Adam epsilon.")
    label_smoothing: float = setting(0.1, "epsilon_ls: label smoothing of the loss.")
    max_tokens: int = setting(
        128,
        "Tokens kept per training sentence, START/END included; the model's positional table "
        "is made at least this long.",
        positive=True,
        metavar="N",
    )
    vocab_size: int = setting(8000, "Target size of each WordPiece vocabulary.", positive=True)
    vocab_min_count: int = setting(
        10,
        "Learn a wordpiece only if it occurs N times or more: on a small corpus this, not "
        "vocab_size, bounds the vocabulary.",
        positive=True,
        metavar="N",
    )
    vocab_sample: int = setting(
        1_000_000,
        "Learn the vocabularies from about N pairs (N sentences per language), drawn across the "
        "training corpora by their weights; all of them when they hold fewer.",
        positive=True,
        metavar="N",
    )
    vocab_max_words: int = setting(
        40_000,
        "Learn WordPiece from the N most frequent words of each language's sample (a shared "
        "vocabulary from the 2N of both); rarer ones are left out: learning time grows faster "
        "than the words, and the rarest barely move a vocabulary.",
        positive=True,
        metavar="N",
    )
    shared_vocab: bool = setting(
        False, "One vocabulary of vocab_size tokens, learnt from both languages, for both."
    )
    lower_case_source: bool = setting(
        False,
        "The source tokenizer lower-cases its input; the target keeps case (case-insensitive "
        "input, cased translations).",
    )
    truecase_target: bool = setting(
        False,
        'Learn the target\'s first word as written inside sentences ("The car" as "the car"; '
        '"I" and names keep their capital); translations get their first letter capitalised.',
    )
    concat_fraction: float = setting(
        0.0,
        "Add about FRACTION x the training pairs to each epoch, joined two by two, so the model "
        "learns multi-sentence inputs (0: off).",
        metavar="FRACTION",
    )
    token_budget: int = setting(
        4096, "Tokens per batch (source or target side, padding included).", positive=True
    )
    accumulate_steps: int = setting(
        1,
        "Each optimizer step sums N batches per replica, as one batch of N x token_budget "
        "tokens (steps count updates).",
        positive=True,
        metavar="N",
    )
    shuffle_buffer: int = setting(
        20000, "Tokenized sentence pairs shuffled before batching, each epoch.", positive=True
    )
    seed: int = setting(0, "Seed of the weights, dropout and the per-epoch shuffle order.")
    checkpoint_every: int = setting(
        500, "Steps between checkpoints (and one at each epoch end).", positive=True
    )
    keep_checkpoints: int = setting(5, "Training checkpoints kept.", positive=True)
    average_last: int = setting(
        0, "Average the last N checkpoints at the end (0: off).", metavar="N"
    )
    log_every: int = setting(50, "Steps between TensorBoard scalars.", positive=True)
    mixed_precision: str | None = setting(
        None,
        "Compute dtype of the layers (float32: no mixed precision; auto: bfloat16 where the "
        "CPU has native bfloat16, AVX512_BF16 or AMX-BF16, or a GPU is visible, else float32; "
        "a run records its choice and why in config.json).",
        choices=(None, "float16", "bfloat16", "auto"),
        none="float32",
    )
    strategy: str = setting(
        "default",
        "tf.distribute strategy.",
        choices=("default", "mirrored", "multiworker"),
    )
    heartbeat_timeout: int = setting(
        60,
        "multiworker: seconds without a worker's heartbeats before the job stops (with "
        "TensorFlow's own 10, a CI run on 2 cores lost a live worker; a killed one is often "
        "found sooner).",
        positive=True,
        metavar="SECONDS",
    )
    shard_data: bool = setting(
        False,
        "multiworker, custom loop: each worker reads and trains on its own part of each epoch "
        "(its pieces of the corpus files, else every Nth pair) instead of reading the whole "
        "epoch and training its slice of every update; the run then differs from one process's.",
    )
    eval_every: int | None = setting(
        None,
        "Every N steps, translate the dev subset greedily: BLEU, chrF and sample translations "
        "to logs/validation, the best weights by BLEU to checkpoints/best/ (its time counts in "
        "max_minutes; None: off).",
        positive=True,
        metavar="N",
    )
    eval_sentences: int = setting(
        300, "The dev subset: the first N validation pairs.", positive=True, metavar="N"
    )
    patience: int | None = setting(
        None,
        "With eval_every: stop once dev BLEU has not improved for K evaluations.",
        positive=True,
        metavar="K",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.epochs is None and self.max_steps is None and self.max_minutes is None:
            raise InvalidValueError(
                "With epochs=None, set max_steps or max_minutes to end training."
            )
        if self.patience is not None and self.eval_every is None:
            raise InvalidValueError("patience counts evaluations: set eval_every too.")
        if self.average_last < 0:
            raise InvalidValueError(f"average_last must be >= 0, got {self.average_last}.")
        _check_unit_interval(self, ("cooldown", "concat_fraction"), closed=True)
        _check_unit_interval(self, ("label_smoothing",))
