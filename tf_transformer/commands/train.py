"""`tf-transformer train`: build tokenizers, then train with the custom loop or `model.fit`."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from tf_transformer.config import PRESETS, ModelConfig, TrainConfig, get_preset, get_train_preset

# Flags that override ModelConfig / TrainConfig fields of the same (paper) name.
MODEL_FLAGS = ("num_layers", "d_model", "num_heads", "dff", "dropout_rate")
TRAIN_FLAGS = (
    "warmup_steps",
    "label_smoothing",
    "vocab_size",
    "token_budget",
    "epochs",
    "max_steps",
    "max_minutes",
    "seed",
    "average_last",
    "strategy",
    "mixed_precision",
    "checkpoint_every",
)
# What a resumed run may change; everything else comes from its config.json.
RESUME_FLAGS = (
    "epochs",
    "max_steps",
    "max_minutes",
    "average_last",
    "checkpoint_every",
    "strategy",
)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


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
    data.add_argument("--dataset", default="sample", help="sample | ted_hrlr | PATH")
    data.add_argument("--tarball", default=None, help="A local TED tarball (ted_hrlr).")
    data.add_argument("--data-dir", default=None, help="The TFDS data directory.")
    model = parser.add_argument_group("model and optimizer (paper names)")
    model.add_argument("--preset", default="small", choices=sorted(PRESETS))
    for name in ("num_layers", "d_model", "num_heads", "dff"):
        model.add_argument(f"--{name.replace('_', '-')}", type=_positive, default=None)
    model.add_argument("--dropout-rate", type=float, default=None)
    model.add_argument("--warmup-steps", type=_positive, default=None)
    model.add_argument("--label-smoothing", type=float, default=None)
    model.add_argument("--max-length", type=_positive, default=None, help="Tokens per sentence.")
    model.add_argument("--vocab-size", type=_positive, default=None, help="WordPiece target.")
    model.add_argument("--token-budget", type=_positive, default=None, help="Tokens per batch.")
    loop = parser.add_argument_group("training")
    loop.add_argument("--epochs", type=_positive, default=None)
    loop.add_argument("--max-steps", type=_positive, default=None)
    loop.add_argument(
        "--max-minutes",
        type=_positive_float,
        default=None,
        help="Wall-clock budget: save, average and stop once reached (per call).",
    )
    loop.add_argument("--checkpoint-every", type=_positive, default=None)
    loop.add_argument("--run-dir", default=None, help="Default: runs/PRESET.")
    loop.add_argument("--resume", action="store_true", help="Continue the run in --run-dir.")
    loop.add_argument("--overwrite", action="store_true", help="Delete --run-dir first.")
    loop.add_argument("--fit", action="store_true", help="model.fit instead of the custom loop.")
    loop.add_argument("--strategy", default=None, choices=("default", "mirrored", "multiworker"))
    loop.add_argument("--mixed-precision", default=None, choices=("float16", "bfloat16"))
    loop.add_argument("--average-last", type=_positive, default=None, metavar="N")
    loop.add_argument("--seed", type=int, default=None)
    loop.add_argument("--quiet", action="store_true", help="No progress bars.")
    parser.set_defaults(func=run)


def _overrides(args: argparse.Namespace, names) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def configs_from_args(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig]:
    """The model and training configs of a new run: the preset, then the flags."""
    model_config = get_preset(args.preset).replace(**_overrides(args, MODEL_FLAGS))
    train_config = get_train_preset(args.preset).replace(**_overrides(args, TRAIN_FLAGS))
    if args.max_length is not None:
        train_config = train_config.replace(max_tokens=args.max_length)
    model_config = model_config.replace(
        max_length=max(model_config.max_length, train_config.max_tokens)
    )
    return model_config, train_config


def prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuses to touch an existing run unless told to resume or overwrite it."""
    from tf_transformer.cli import CLIError

    if resume and overwrite:
        raise CLIError("--resume and --overwrite exclude each other.")
    exists = run_dir.exists() and any(run_dir.iterdir())
    if resume and not (run_dir / "config.json").is_file():
        raise CLIError(f"--resume: {run_dir} is not a run directory (no config.json).")
    if exists and not resume and not overwrite:
        raise CLIError(
            f"{run_dir} already exists; pass --resume to continue it or --overwrite to start over."
        )
    if exists and overwrite:
        shutil.rmtree(run_dir)


def train_run(
    run_dir: str | Path,
    *,
    dataset: str = "sample",
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    use_fit: bool = False,
    tarball: str | None = None,
    data_dir: str | None = None,
    progress: bool = True,
):
    """Loads the data, builds (or reloads) the tokenizers and trains in `run_dir`.

    A run directory that already has tokenizers and a config.json is resumed: its stored
    model config is used (`model_config` only supplies the sizes of a new run).

    Returns:
      The `TrainResult` of the custom loop, or `(model, history)` of `model.fit`.
    """
    from tf_transformer.data import load_dataset
    from tf_transformer.data.pipeline import make_batches
    from tf_transformer.run_dir import RunDir
    from tf_transformer.tokenizers import build_tokenizers

    run = RunDir(run_dir)
    data = {"dataset": str(dataset), "tarball": tarball, "data_dir": data_dir}
    load = {"tarball": tarball, "data_dir": data_dir}
    train_pairs = load_dataset(dataset, "train", **load)
    val_pairs = load_dataset(dataset, "validation", **load)
    if run.exists() and run.tokenizers_path.is_dir():
        stored = run.read_config()
        model_config = ModelConfig.from_dict(stored["model"])
        tokenizers = run.load_tokenizers()
    else:
        tokenizers = build_tokenizers(train_pairs, vocab_size=train_config.vocab_size)
        tokenizers.save(str(run.tokenizers_path))
        model_config = model_config.replace(
            input_vocab_size=int(tokenizers.pt.get_vocab_size()),
            target_vocab_size=int(tokenizers.en.get_vocab_size()),
        )
    run.write_config({**(run.read_config() if run.exists() else {}), "data": data})
    batching = {"max_length": train_config.max_tokens, "token_budget": train_config.token_budget}
    val_ds = make_batches(val_pairs, tokenizers, shuffle=False, **batching)
    if use_fit:
        from tf_transformer.fit import fit

        train_ds = make_batches(
            train_pairs,
            tokenizers,
            seed=train_config.seed,
            shuffle_buffer=train_config.shuffle_buffer,
            **batching,
        )
        return fit(run, model_config, train_config, train_ds, val_ds, verbose=int(progress))
    from tf_transformer.train import epoch_batches, train

    train_ds = epoch_batches(train_pairs, tokenizers, train_config)
    return train(run, model_config, train_config, train_ds, val_ds, progress=progress)


def run(args: argparse.Namespace) -> int:
    from tf_transformer.cli import CLIError
    from tf_transformer.run_dir import RunDir
    from tf_transformer.train import NonFiniteLossError

    run_dir = Path(args.run_dir or f"runs/{args.preset}")
    prepare_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)
    model_config, train_config = configs_from_args(args)
    dataset = args.dataset
    if args.resume:
        stored = RunDir(run_dir).read_config()
        train_config = TrainConfig.from_dict(stored["train"]).replace(
            **_overrides(args, RESUME_FLAGS)
        )
        dataset = stored.get("data", {}).get("dataset", dataset)
    elif not Path(dataset).exists() and dataset not in ("sample", "ted_hrlr"):
        # Fail before building anything (load_dataset repeats the check with the details).
        from tf_transformer.data import load_dataset

        load_dataset(dataset, "train", tarball=args.tarball, data_dir=args.data_dir)
    try:
        result = train_run(
            run_dir,
            dataset=dataset,
            model_config=model_config,
            train_config=train_config,
            use_fit=args.fit,
            tarball=args.tarball,
            data_dir=args.data_dir,
            progress=not args.quiet,
        )
    except NonFiniteLossError as error:
        raise CLIError(str(error)) from None
    if args.fit:
        print(f"fit done: {run_dir}")
    elif result.stopped_by in ("SIGINT", "SIGTERM"):
        print(
            f"stopped by {result.stopped_by} at step {result.step}; checkpoint "
            f"{result.checkpoint}. Continue with --resume --run-dir {run_dir}."
        )
    else:
        print(f"trained to step {result.step} (epoch {result.epoch}): {result.checkpoint}")
    return 0
