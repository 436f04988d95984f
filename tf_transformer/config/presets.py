"""Named presets: a model and a training configuration for each name."""

from __future__ import annotations

from tf_transformer.config.model import ModelConfig
from tf_transformer.config.train import TrainConfig
from tf_transformer.errors import InvalidValueError

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


# ~80k mixed pairs (everyday speech and technical documentation, docs/data.md "Your own data"):
# the small-data model; its vocabulary and length come from its TrainConfig below.
PRESETS["mixed-data"] = PRESETS["small-data"]


def get_preset(name: str) -> ModelConfig:
    """Returns the named preset; raises ValueError naming the valid presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise InvalidValueError(
            f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}."
        ) from None


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
        # on Tatoeba dev (beam 4, length penalty 1.0; 25%: 38.4, 50%: 39.7), TED dev 15.1 against 10.4;
        # multi-sentence inputs no longer lose their second sentence (bench/README.md).
        concat_fraction=0.75,
        token_budget=1024,  # 2048 measured worse at the same number of tokens
        # bfloat16 where it is native: its train step measured 1.04-1.08x float32 on AVX512_BF16
        # CPUs (same loss), 0.87x (slower) on an AVX2-only AMD EPYC, where it runs emulated;
        # "auto" picks it only with AVX512_BF16, AMX-BF16 or a GPU (training.step.mixed_precision).
        mixed_precision="auto",
        checkpoint_every=200,
        average_last=5,  # the last 1,000 steps
        eval_every=500,  # dev BLEU, greedy; keeps checkpoints/best
        # Up to 1,000 dev sentences (all 959 of Tatoeba dev, ~3 s an evaluation): on 300 the
        # pick between the best and the averaged checkpoint was noise (±1 BLEU).
        eval_sentences=1000,
    ),
}
# ~80k mixed pairs on 2 CPU cores in 60 minutes: small-data with issue 34's naive run's
# --vocab-size 8000 --max-tokens 128, and half of each epoch's pairs joined two by two. Chosen by
# comparisons at 3,000 equal steps on four dev sets (docs/benchmarks/quality.md, "Mixed corpora"):
# joining 50% instead of 25% gave NTREX news +1.0 and TED +0.6 BLEU (300 sentences each: near
# the noise) at the same cost a step; d_model 384 gave as much but costs 1.6x a step. 3 layers
# lost on all four sets at 1.31x a step; a 16,000 vocabulary gained at equal steps but costs 1.48x
# a step and loses in equal time; 4,000 lost. The corpora and their weights are data (--dataset,
# --dataset-weights; the command is in docs/data.md and bench/quality.py).
TRAIN_PRESETS["mixed-data"] = TRAIN_PRESETS["small-data"].replace(
    # Documentation sentences average 15 words: 64 tokens cut many; 8,000 joint wordpieces
    # for two languages and technical vocabulary.
    max_tokens=128,
    vocab_size=8000,
    # Joined pairs teach longer sentences (news averages ~25 words); pairs over max_tokens
    # are truncated.
    concat_fraction=0.5,
    checkpoint_every=500,
    # The recipe's hour on any CPU, the cooldown over its last 20% (12 minutes): 480-530 steps
    # a minute on the AVX-512 AMD EPYC of docs/benchmarks/quality.md (~24,000 steps an hour),
    # 100-120 on an AVX2-only one (issue 47), where a 24,000-step bound took ~3.5 h. With --max-steps too, whichever
    # comes first ends the run; --max-minutes M sets another budget.
    max_minutes=60.0,
    # Four dev sets are scored at each evaluation: fewer sentences, less often.
    eval_every=1500,
    eval_sentences=300,
)


def get_train_preset(name: str) -> TrainConfig:
    """Returns the named training preset; raises ValueError naming the valid presets."""
    try:
        return TRAIN_PRESETS[name]
    except KeyError:
        raise InvalidValueError(
            f"Unknown preset {name!r}; choose one of {', '.join(TRAIN_PRESETS)}."
        ) from None
