"""Frozen configuration dataclasses and named presets.

- `ModelConfig`: the network (paper names); `max_length` is the positional table, the longest
  sequence the model can take.
- `TrainConfig`: optimizer, batching and loop; `max_tokens` caps each training sentence.
- `DecodeConfig`: the decoding defaults of the Translator, the export and the CLI;
  `max_source_tokens` caps each source sentence, `max_new_tokens` the tokens generated.
- `DataConfig`: which corpus and which language pair.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

from typing_extensions import Self  # typing.Self needs Python 3.11


class _DictConfig:
    """`replace`, `to_dict` and `from_dict` shared by the frozen config dataclasses."""

    def replace(self, **changes: Any) -> Self:
        """Returns a copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # Keys written by earlier versions, and the fields they became.
    RENAMED: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """Builds from `to_dict()` output; unknown keys are refused by name."""
        values = {cls.RENAMED.get(key, key): value for key, value in values.items()}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} fields: {unknown}. Known: {sorted(known)}.")
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class ModelConfig(_DictConfig):
    """Hyperparameters of the encoder-decoder Transformer (paper names throughout).

    Defaults are the paper's base model ("Attention Is All You Need", Table 3).
    """

    num_layers: int = 6  # N: encoder layers = decoder layers
    d_model: int = 512  # model width
    num_heads: int = 8  # h: attention heads, head size d_model / num_heads
    dff: int = 2048  # inner width of the position-wise feed-forward network
    dropout_rate: float = 0.1  # P_drop
    # Regularizers for small corpora (Sennrich & Zhang 2019; Araabi & Monz 2020), 0 = off:
    attention_dropout: float = 0.0  # on the attention weights, after the softmax
    activation_dropout: float = 0.0  # on the feed-forward activations, after the activation
    word_dropout: float = 0.0  # zero a token's whole word embedding (source and target)
    activation: str = dataclasses.field(
        default="relu",
        metadata={"help": "feed-forward activation: relu (the paper) or gelu"},
    )
    input_vocab_size: int = 8000  # source (Portuguese) vocabulary
    target_vocab_size: int = 8000  # target (English) vocabulary
    max_length: int = 512  # longest sequence the positional table covers
    norm_first: bool = False  # False: post-norm as in the paper; True: pre-norm
    positional_layout: str = "interleaved"  # "interleaved" (paper) or "concat" (tutorial)
    share_target_embeddings: bool = False  # tie the output projection to target embeddings
    # One matrix for source and target embeddings and the output projection (three-way tying,
    # Press & Wolf 2017); implies share_target_embeddings, needs input == target vocab size.
    share_embeddings: bool = False

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})."
            )
        if self.positional_layout not in ("interleaved", "concat"):
            raise ValueError(
                f"positional_layout must be 'interleaved' or 'concat', got "
                f"{self.positional_layout!r}."
            )
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {self.activation!r}.")
        for name in ("num_layers", "d_model", "num_heads", "dff", "max_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        for name in ("dropout_rate", "attention_dropout", "activation_dropout", "word_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}.")

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# Named presets. Vocabulary sizes are placeholders: training replaces them with the sizes of the
# tokenizers it builds.
PRESETS: dict[str, ModelConfig] = {
    # Tests and smoke runs: seconds on a CPU. One layer: there, tracing the graphs costs more
    # than running them, and a second layer doubles it (`make test`: 7.3 minutes with two, 5.2
    # with one). Tests of what is per layer (caches, attention maps, conversions) ask for two.
    "tiny": ModelConfig(
        num_layers=1, d_model=32, num_heads=2, dff=64, dropout_rate=0.0, max_length=64
    ),
    # A small model for the sample corpus and laptops.
    "small": ModelConfig(
        num_layers=2, d_model=128, num_heads=4, dff=512, dropout_rate=0.1, max_length=128
    ),
    # The TensorFlow tutorial's model.
    "tutorial": ModelConfig(
        num_layers=4,
        d_model=128,
        num_heads=8,
        dff=512,
        dropout_rate=0.1,
        input_vocab_size=7765,
        target_vocab_size=7010,
        max_length=512,
    ),
    # Small real corpora (~17k pairs) on a CPU: 2 layers of twice the tutorial's width, pre-norm
    # (post-norm stalls at ~43% token accuracy). In a fixed CPU budget depth costs more than it
    # gives: 27 minutes, Tatoeba dev cased BLEU: 2 layers d_model 256 36.2 (3 layers 35.8);
    # d_model 128 with 2, 3, 4, 6 layers 35.3, 34.6, 34.5, 32.7 (bench/README.md).
    "small-data": ModelConfig(
        num_layers=2,
        d_model=256,
        num_heads=8,
        dff=1024,
        dropout_rate=0.1,
        max_length=128,
        norm_first=True,
        # One joint pt+en vocabulary (TrainConfig.shared_vocab) and one matrix for the source
        # and target embeddings and the output projection: level with two vocabularies at
        # equal steps, +1 BLEU at 27 minutes (bench/README.md, "Translation quality").
        share_embeddings=True,
    ),
    # The paper's base model.
    "base": ModelConfig(),
}


def get_preset(name: str) -> ModelConfig:
    """Returns the named preset; raises ValueError naming the valid presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}.") from None


@dataclasses.dataclass(frozen=True)
class TrainConfig(_DictConfig):
    """Training settings: optimizer and schedule (paper §5.3–5.4), data, run-time options."""

    epochs: int | None = 20  # passes over the training data (None: max_steps/max_minutes decide)
    max_steps: int | None = None  # stop after this many optimizer steps (None: epochs decide)
    max_minutes: float | None = None  # wall-clock budget of one `train` call (None: no limit)
    warmup_steps: int = 4000  # linear warm-up of the learning-rate schedule
    lr_scale: float = 1.0  # constant factor on the paper's schedule
    # The last fraction of the budget (max_steps, max_minutes or epochs, whichever ends the run
    # first) over which the learning rate falls linearly to 0 (0: off).
    cooldown: float = 0.0
    beta_1: float = 0.9  # Adam β1
    beta_2: float = 0.98  # Adam β2
    epsilon: float = 1e-9  # Adam ε
    label_smoothing: float = 0.1  # ε_ls
    max_tokens: int = 128  # tokens kept per training sentence (the tutorial's MAX_TOKENS)
    vocab_size: int = 8000  # target size of each WordPiece vocabulary
    # A wordpiece is learnt only if it occurs at least this often (the WordPiece learner's
    # `lower_thresh`): on a small corpus it, not vocab_size, bounds the vocabulary.
    vocab_min_count: int = 10
    shared_vocab: bool = False  # one vocabulary (of vocab_size) for source and target
    lower_case_source: bool = False  # source tokenizer lower-cases (case-insensitive input)
    # The target's sentence-initial words written as inside sentences ("The" -> "the"; not "I",
    # "Tom"); translations get their first letter capitalised (tf_transformer.text.truecase).
    truecase_target: bool = False
    # Each epoch adds about this fraction of the training pairs again, joined two by two
    # (tf_transformer.data.concatenation; 0: off).
    concat_fraction: float = 0.0
    token_budget: int = 4096  # tokens per batch (source or target side, padding included)
    accumulate_steps: int = 1  # batches per replica summed into one optimizer update
    shuffle_buffer: int = 20000  # sentence pairs shuffled per epoch
    seed: int = 0  # weights, dropout and the per-epoch shuffle order
    checkpoint_every: int = 500  # steps between checkpoints (and one at each epoch end)
    keep_checkpoints: int = 5  # checkpoints kept by the CheckpointManager
    average_last: int = 0  # average the last N checkpoints at the end (0: off)
    log_every: int = 50  # steps between TensorBoard scalars
    mixed_precision: str | None = None  # None, "float16" or "bfloat16"
    strategy: str = "default"  # "default", "mirrored" or "multiworker"
    eval_every: int | None = None  # steps between dev BLEU evaluations (None: off)
    eval_sentences: int = 300  # the first N validation pairs make the fixed dev subset
    patience: int | None = None  # stop after N evaluations without a better dev BLEU

    # config.json of runs trained before the rename
    RENAMED: ClassVar[dict[str, str]] = {"max_length": "max_tokens"}

    def __post_init__(self) -> None:
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"epochs must be positive, got {self.epochs}.")
        if self.epochs is None and self.max_steps is None and self.max_minutes is None:
            raise ValueError("With epochs=None, set max_steps or max_minutes to end training.")
        for name in (
            "warmup_steps",
            "max_tokens",
            "vocab_size",
            "vocab_min_count",
            "token_budget",
            "accumulate_steps",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        for name in ("checkpoint_every", "keep_checkpoints", "log_every", "shuffle_buffer"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        for name in ("eval_every", "patience"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.eval_sentences < 1:
            raise ValueError(f"eval_sentences must be positive, got {self.eval_sentences}.")
        if self.patience is not None and self.eval_every is None:
            raise ValueError("patience counts evaluations: set eval_every too.")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be positive, got {self.max_steps}.")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes must be positive, got {self.max_minutes}.")
        if self.average_last < 0:
            raise ValueError(f"average_last must be >= 0, got {self.average_last}.")
        if not 0.0 <= self.cooldown <= 1.0:
            raise ValueError(f"cooldown must be in [0, 1], got {self.cooldown}.")
        if not 0.0 <= self.concat_fraction <= 1.0:
            raise ValueError(f"concat_fraction must be in [0, 1], got {self.concat_fraction}.")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}.")
        if self.mixed_precision not in (None, "float16", "bfloat16"):
            raise ValueError(
                f"mixed_precision must be None, 'float16' or 'bfloat16', got "
                f"{self.mixed_precision!r}."
            )
        if self.strategy not in ("default", "mirrored", "multiworker"):
            raise ValueError(
                f"strategy must be 'default', 'mirrored' or 'multiworker', got {self.strategy!r}."
            )


# Training presets, paired by name with the model presets.
TRAIN_PRESETS: dict[str, TrainConfig] = {
    "tiny": TrainConfig(
        epochs=1,
        warmup_steps=100,
        label_smoothing=0.0,
        max_tokens=64,
        vocab_size=2000,
        token_budget=1024,
        checkpoint_every=100,
        log_every=10,
    ),
    "small": TrainConfig(
        epochs=5,
        warmup_steps=1000,
        max_tokens=64,
        vocab_size=4000,
        token_budget=4096,
        checkpoint_every=250,
    ),
    "tutorial": TrainConfig(epochs=20, warmup_steps=4000, max_tokens=128, token_budget=4096),
    "base": TrainConfig(epochs=20, warmup_steps=4000, max_tokens=256, token_budget=25000),
    # Chosen on tatoeba_pt_en/dev (bench/README.md, "Translation quality"): 1,000-step
    # comparisons, then 27-minute runs; a quiet 27-minute CPU run makes ~11-12k steps of ~70
    # sentences.
    "small-data": TrainConfig(
        epochs=100,  # the wall-clock budget (--max-minutes) decides
        warmup_steps=300,
        # Peak 1.8e-3 at the preset's d_model 256 (2.6e-3 at 128, where 1.0 and 0.25 measured
        # worse).
        lr_scale=0.5,
        # The last 20% of the --max-minutes budget takes the rate linearly to 0: +0.4 to +0.7
        # BLEU on Tatoeba dev (36.6 and 36.9 against 36.2); over the last 50%, 35.8
        # (bench/README.md).
        cooldown=0.2,
        # 0.2: level with 0.1 at equal steps; at 27 minutes +1.0 BLEU on Tatoeba dev with the
        # best checkpoint (-0.3 averaged), TED dev +0.4 / +0.7 (bench/README.md).
        label_smoothing=0.2,
        max_tokens=64,
        # One joint vocabulary: 3,574 wordpieces on Tatoeba + CrioleSet, the source lower-cased.
        vocab_size=4000,
        shared_vocab=True,  # for the model's share_embeddings
        lower_case_source=True,  # +1.8 BLEU on Tatoeba dev, TED 7.5 -> 8.1 (lower-cased sources)
        # Three quarters as many pairs again per epoch, joined two by two: 40.0 against 36.9
        # on Tatoeba dev (beam 4, alpha 1.0; 25%: 38.4, 50%: 39.7), TED dev 15.1 against 10.4;
        # multi-sentence inputs no longer lose their second sentence (bench/README.md).
        concat_fraction=0.75,
        token_budget=1024,  # 2048 measured worse at the same number of tokens
        mixed_precision="bfloat16",  # 1.04-1.08x float32 here (AVX512_BF16), same loss
        checkpoint_every=200,
        average_last=5,  # the last 1,000 steps
        eval_every=500,  # dev BLEU, greedy; keeps checkpoints/best
        # Up to 1,000 dev sentences (all 959 of Tatoeba dev, ~3 s an evaluation): on 300 the
        # pick between the best and the averaged checkpoint was noise (±1 BLEU).
        eval_sentences=1000,
    ),
}


def get_train_preset(name: str) -> TrainConfig:
    """Returns the named training preset; raises ValueError naming the valid presets."""
    try:
        return TRAIN_PRESETS[name]
    except KeyError:
        raise ValueError(
            f"Unknown preset {name!r}; choose one of {', '.join(TRAIN_PRESETS)}."
        ) from None


@dataclasses.dataclass(frozen=True)
class DecodeConfig(_DictConfig):
    """How to decode: the one set of defaults of the Translator, the export and the CLI."""

    beam_size: int = 4  # beams per sentence; 1 = greedy
    # GNMT alpha of beam search (Wu et al. 2016, eq. 14). 1.0 scored at least as well as 0.6
    # on Tatoeba dev in 24 of 29 small-data evaluations (up to +0.5 BLEU; the others 0.1-0.15
    # lower), and better than 1.3 and 1.6 (bench/README.md, "Translation quality"); the
    # paper's 0.6 was tuned on WMT.
    length_penalty: float = 1.0
    max_source_tokens: int | None = None  # source tokens kept, START/END included (None: 128)
    max_new_tokens: int | None = None  # tokens generated, END included (None: 128)

    # Both caps when unset, bounded by the model's positional table.
    DEFAULT_LENGTH: ClassVar[int] = 128

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {self.beam_size}.")
        if self.length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {self.length_penalty}.")
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be at least 2, got {value}.")

    def resolved(self, model_max_length: int) -> Self:
        """Both caps set: the defaults bounded by the model's positional table (checked)."""
        caps = {}
        for name in ("max_source_tokens", "max_new_tokens"):
            value = getattr(self, name)
            value = min(self.DEFAULT_LENGTH, model_max_length) if value is None else value
            if value > model_max_length:
                raise ValueError(
                    f"{name} ({value}) exceeds the model's positional table "
                    f"(max_length {model_max_length})."
                )
            caps[name] = value
        return self.replace(**caps)


# Data specs that are names, not paths (see `tf_transformer.data.load_dataset`).
NAMED_DATASETS = ("sample", "sample_written", "ted_hrlr", "ted_hrlr_translate/pt_to_en")
_PATH_FIELDS = ("dataset", "tarball", "data_dir")


@dataclasses.dataclass(frozen=True)
class DataConfig(_DictConfig):
    """Which corpus to train on, and its language pair (source -> target)."""

    # "sample" (lower case), "sample_written" (cased), "ted_hrlr", a directory or a .tsv file
    dataset: str = "sample"
    source_lang: str = "pt"  # source language code: text files are read as train.<source_lang>
    target_lang: str = "en"  # target language code
    tarball: str | None = None  # ted_hrlr: a local copy (or mirror URL) of the TED tarball
    data_dir: str | None = None  # ted_hrlr: the TFDS data directory

    def __post_init__(self) -> None:
        for name in ("source_lang", "target_lang"):
            code = getattr(self, name)
            if not code or not code.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"{name} must be a language code such as 'pt', got {code!r}.")
        if self.source_lang == self.target_lang:
            raise ValueError(f"source and target language are both {self.source_lang!r}.")

    def recorded(self) -> Self:
        """As config.json records it: local paths made absolute (names and URLs unchanged), so
        a run resumed or evaluated from another working directory finds its data."""
        from pathlib import Path

        def absolute(spec: str | None) -> str | None:
            if spec is None or spec in NAMED_DATASETS or "://" in spec:
                return spec
            path = Path(spec).expanduser()
            return str(path.resolve()) if path.exists() else spec

        return self.replace(**{name: absolute(getattr(self, name)) for name in _PATH_FIELDS})

    def load(self, split: str):
        """One split as `(source, target)` string pairs (see `tf_transformer.data.load_dataset`)."""
        from tf_transformer.data import load_dataset

        return load_dataset(
            self.dataset,
            split,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            tarball=self.tarball,
            data_dir=self.data_dir,
        )
