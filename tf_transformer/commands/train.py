"""`tf-transformer train`: flags to configs, then `tf_transformer.training.run`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tf_transformer.commands import positive_float, positive_int
from tf_transformer.config import (
    PRESETS,
    DataConfig,
    ModelConfig,
    TrainConfig,
    get_preset,
    get_train_preset,
)

# Flags that override ModelConfig / TrainConfig fields of the same (paper) name.
MODEL_FLAGS = (
    "num_layers",
    "d_model",
    "num_heads",
    "dff",
    "dropout_rate",
    "attention_dropout",
    "activation_dropout",
    "word_dropout",
    "activation",
    "share_embeddings",
)
TRAIN_FLAGS = (
    "warmup_steps",
    "cooldown",
    "label_smoothing",
    "vocab_size",
    "vocab_min_count",
    "shared_vocab",
    "lower_case_source",
    "truecase_target",
    "concat_fraction",
    "token_budget",
    "accumulate_steps",
    "epochs",
    "max_steps",
    "max_minutes",
    "seed",
    "average_last",
    "strategy",
    "mixed_precision",
    "checkpoint_every",
    "max_tokens",
    "eval_every",
    "eval_sentences",
    "patience",
)
# What a resumed run may change; everything else comes from its config.json.
RESUME_FLAGS = (
    "epochs",
    "max_steps",
    "max_minutes",
    "average_last",
    "checkpoint_every",
    "strategy",
    "accumulate_steps",
    "eval_every",
    "patience",
)

LIMITS_HELP = (
    "Training stops at whichever comes first of the limits given on the command line: "
    "--epochs, --max-steps, --max-minutes. The preset's epochs apply only when neither "
    "--epochs nor --max-steps is given (with --resume: the run's stored epochs)."
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="Train a Transformer into a run directory (or resume one).",
        description=(
            "Builds WordPiece tokenizers from the training split, then trains and checkpoints "
            "into RUN_DIR/{config.json,tokenizers,checkpoints,logs}. SIGINT/SIGTERM save a "
            "checkpoint and exit; --resume continues from it."
        ),
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset", default=None, help="sample (default) | sample_written | ted_hrlr | PATH"
    )
    data.add_argument("--tarball", default=None, help="A local TED tarball (ted_hrlr).")
    data.add_argument("--data-dir", default=None, help="The TFDS data directory.")
    data.add_argument(
        "--source-lang",
        default=None,
        metavar="CODE",
        help="Source language (default: pt). Text files are read as train.CODE; the built-in "
        "corpora (sample, ted_hrlr) are pt-en and also serve en->pt.",
    )
    data.add_argument(
        "--target-lang", default=None, metavar="CODE", help="Target language (default: en)."
    )
    model = parser.add_argument_group("model and optimizer (paper names)")
    model.add_argument("--preset", default="small", choices=sorted(PRESETS))
    for name in ("num_layers", "d_model", "num_heads", "dff"):
        model.add_argument(f"--{name.replace('_', '-')}", type=positive_int, default=None)
    model.add_argument("--dropout-rate", type=float, default=None)
    model.add_argument(
        "--attention-dropout",
        type=float,
        default=None,
        metavar="P",
        help="Dropout on the attention weights (default: 0, off).",
    )
    model.add_argument(
        "--activation-dropout",
        type=float,
        default=None,
        metavar="P",
        help="Dropout after the feed-forward ReLU (default: 0, off).",
    )
    model.add_argument(
        "--activation",
        default=None,
        choices=("relu", "gelu"),
        help="Feed-forward activation (default: relu, the paper's).",
    )
    model.add_argument(
        "--word-dropout",
        type=float,
        default=None,
        metavar="P",
        help="Drop whole source and target word embeddings with probability P in training "
        "(default: 0, off).",
    )
    model.add_argument("--warmup-steps", type=positive_int, default=None)
    model.add_argument(
        "--cooldown",
        type=float,
        default=None,
        metavar="FRACTION",
        help="Take the learning rate linearly to 0 over the last FRACTION of the budget "
        "(--max-minutes, --max-steps or --epochs, whichever ends training first; 0: off).",
    )
    model.add_argument("--label-smoothing", type=float, default=None)
    model.add_argument(
        "--concat-fraction",
        type=float,
        default=None,
        metavar="FRACTION",
        help="Add about FRACTION × the training pairs to each epoch, joined two by two "
        "(source to source, target to target), so the model learns multi-sentence inputs "
        "(0: off, the default).",
    )
    model.add_argument(
        "--max-tokens",
        "--max-length",
        dest="max_tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help="Tokens kept per training sentence, START/END included (--max-length: its old "
        "name); the model's positional table is made at least this long.",
    )
    model.add_argument("--vocab-size", type=positive_int, default=None, help="WordPiece target.")
    model.add_argument(
        "--vocab-min-count",
        type=positive_int,
        default=None,
        metavar="N",
        help="Learn a wordpiece only if it occurs N times or more (default 10): on a small corpus "
        "this, not --vocab-size, bounds the vocabulary.",
    )
    model.add_argument(
        "--shared-vocab",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="One WordPiece vocabulary of --vocab-size tokens, learnt from source and target "
        "text together, for both languages (default: the preset's; small-data: on).",
    )
    model.add_argument(
        "--lower-case-source",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="The source tokenizer lower-cases its input (vocabulary learnt from lower-cased "
        "source text); the target keeps case: case-insensitive input, cased translations "
        "(default: the preset's; small-data: on).",
    )
    model.add_argument(
        "--truecase-target",
        action=argparse.BooleanOptionalAction,
        default=None,
        help='Learn the target\'s first word as it is written inside sentences ("The car" as '
        '"the car"; "I" and names keep their capital); translations get their first letter '
        "capitalised (default: the preset's).",
    )
    model.add_argument(
        "--share-embeddings",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="One matrix for source and target embeddings and the output projection "
        "(needs --shared-vocab; default: the preset's; small-data: on).",
    )
    model.add_argument("--token-budget", type=positive_int, default=None, help="Tokens per batch.")
    model.add_argument(
        "--accumulate",
        dest="accumulate_steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="Gradient accumulation: each optimizer step trains N batches per replica, as one "
        "batch of N x --token-budget tokens (steps count updates).",
    )
    loop = parser.add_argument_group("training", LIMITS_HELP)
    loop.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        metavar="N",
        help="Stop after N passes over the training data (default: the preset's epochs, unless "
        "--max-steps is given).",
    )
    loop.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="Stop once the run has taken N optimizer steps in all (a resumed run counts its "
        "earlier steps). Without --epochs it alone decides: the preset's epochs do not end "
        "the run first.",
    )
    loop.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        metavar="M",
        help="Wall-clock budget of this call, M minutes: save, average and stop once reached; adds to the "
        "other limits (the preset's epochs still apply unless --epochs or --max-steps is given).",
    )
    loop.add_argument("--checkpoint-every", type=positive_int, default=None)
    loop.add_argument(
        "--eval-every",
        type=positive_int,
        default=None,
        metavar="N",
        help="Every N steps, translate the dev subset greedily: BLEU, chrF and sample "
        "translations to logs/validation, the best weights by BLEU to checkpoints/best/ "
        "(custom loop only; its time counts in --max-minutes; small-data: 500).",
    )
    loop.add_argument(
        "--eval-sentences",
        type=positive_int,
        default=None,
        metavar="N",
        help="The dev subset: the first N validation pairs (default: 300).",
    )
    loop.add_argument(
        "--patience",
        type=positive_int,
        default=None,
        metavar="K",
        help="With --eval-every: stop once dev BLEU has not improved for K evaluations.",
    )
    loop.add_argument("--run-dir", default=None, help="Default: runs/PRESET.")
    loop.add_argument("--resume", action="store_true", help="Continue the run in --run-dir.")
    loop.add_argument("--overwrite", action="store_true", help="Delete --run-dir first.")
    loop.add_argument("--fit", action="store_true", help="model.fit instead of the custom loop.")
    loop.add_argument("--strategy", default=None, choices=("default", "mirrored", "multiworker"))
    loop.add_argument(
        "--mixed-precision",
        default=None,
        choices=("float32", "float16", "bfloat16"),
        help="Compute dtype of the layers. float32 turns off a preset's mixed precision "
        "(small-data trains in bfloat16: measured 1.04x float32 on a CPU with AVX512_BF16; "
        "check bench/train_throughput.py on yours).",
    )
    loop.add_argument("--average-last", type=positive_int, default=None, metavar="N")
    loop.add_argument("--seed", type=int, default=None)
    loop.add_argument("--quiet", action="store_true", help="No progress bars.")
    parser.set_defaults(func=run)


def _overrides(args: argparse.Namespace, names) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def configs_from_args(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig]:
    """The model and training configs of a new run: the preset, then the flags."""
    model_config = get_preset(args.preset).replace(**_overrides(args, MODEL_FLAGS))
    overrides = _overrides(args, TRAIN_FLAGS)
    if overrides.get("mixed_precision") == "float32":
        overrides["mixed_precision"] = None  # TrainConfig's "no mixed precision"
    train_config = get_train_preset(args.preset).replace(**overrides)
    model_config = model_config.replace(
        max_length=max(model_config.max_length, train_config.max_tokens)
    )
    return model_config, step_limited(train_config, args)


def step_limited(train_config: TrainConfig, args: argparse.Namespace) -> TrainConfig:
    """--max-steps without --epochs: the steps alone bound the run (see LIMITS_HELP)."""
    if args.max_steps is not None and args.epochs is None:
        return train_config.replace(epochs=None)
    return train_config


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuses to touch an existing run unless told to resume or overwrite it."""
    from tf_transformer.cli import CLIError

    if resume and overwrite:
        raise CLIError("--resume and --overwrite exclude each other.")
    from tf_transformer.training.run_lock import LOCK_NAME

    exists = run_dir.exists() and any(p.name != LOCK_NAME for p in run_dir.iterdir())
    if resume and not (run_dir / "config.json").is_file():
        raise CLIError(f"--resume: {run_dir} is not a run directory (no config.json).")
    if exists and not resume and not overwrite:
        raise CLIError(
            f"{run_dir} already exists; pass --resume to continue it or --overwrite to start over."
        )


def data_from_args(args: argparse.Namespace) -> DataConfig | None:
    """The data flags as a `DataConfig`; None for a resumed run given no data flags (its own)."""
    given = {
        "dataset": args.dataset,
        "tarball": args.tarball,
        "data_dir": args.data_dir,
        "source_lang": args.source_lang,
        "target_lang": args.target_lang,
    }
    given = {name: value for name, value in given.items() if value is not None}
    if args.resume:
        if not given:
            return None
        # The run's own data; the flags may say where it lives now.
        from tf_transformer.run_dir import RunDir

        stored = RunDir(args.run_dir).read_config().get("data") or {}
        return DataConfig.from_dict({**stored, **given})
    return DataConfig(**given)


def run(args: argparse.Namespace) -> int:
    from tf_transformer import training
    from tf_transformer.run_dir import RunDir

    args.run_dir = args.run_dir or f"runs/{args.preset}"
    run_dir = Path(args.run_dir)
    check_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)
    model_config, train_config = configs_from_args(args)
    changes = None
    if args.resume:
        changes = _overrides(args, RESUME_FLAGS)
        if args.max_steps is not None and args.epochs is None:
            changes["epochs"] = None
    result = training.run(
        run_dir,
        data_from_args(args),
        model_config,
        None if args.resume else train_config,  # a resumed run keeps its own
        fit=args.fit,
        overwrite=args.overwrite,
        train_changes=changes,
        progress=not args.quiet,
    )
    if result.stopped_by in ("SIGINT", "SIGTERM"):
        print(
            f"stopped by {result.stopped_by} at step {result.step}; checkpoint "
            f"{result.checkpoint}. Continue with --resume --run-dir {run_dir}."
        )
    else:
        how = "fit" if args.fit else "trained"
        why = " (stopped by patience)" if result.stopped_by == "patience" else ""
        print(f"{how} to step {result.step} (epoch {result.epoch}){why}: {result.checkpoint}")
    if result.evaluations:
        best = RunDir(run_dir).best_record()
        print(
            f"validation: {len(result.evaluations)} evaluations, {result.eval_seconds:.1f} s; "
            f"best BLEU {best['bleu']:.1f} at step {best['step']}: {result.best_checkpoint}"
        )
    return 0
