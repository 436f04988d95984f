"""`tf-transformer train`: build tokenizers, then train with the custom loop or `model.fit`."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from tf_transformer.commands import positive_float, positive_int
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


# The epochs of a run that --max-steps alone bounds: the preset's epochs then never stop it first.
NO_EPOCH_LIMIT = 1_000_000

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
    data.add_argument("--dataset", default="sample", help="sample | ted_hrlr | PATH")
    data.add_argument("--tarball", default=None, help="A local TED tarball (ted_hrlr).")
    data.add_argument("--data-dir", default=None, help="The TFDS data directory.")
    model = parser.add_argument_group("model and optimizer (paper names)")
    model.add_argument("--preset", default="small", choices=sorted(PRESETS))
    for name in ("num_layers", "d_model", "num_heads", "dff"):
        model.add_argument(f"--{name.replace('_', '-')}", type=positive_int, default=None)
    model.add_argument("--dropout-rate", type=float, default=None)
    model.add_argument("--warmup-steps", type=positive_int, default=None)
    model.add_argument("--label-smoothing", type=float, default=None)
    model.add_argument("--max-length", type=positive_int, default=None, help="Tokens per sentence.")
    model.add_argument("--vocab-size", type=positive_int, default=None, help="WordPiece target.")
    model.add_argument("--token-budget", type=positive_int, default=None, help="Tokens per batch.")
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
    loop.add_argument("--run-dir", default=None, help="Default: runs/PRESET.")
    loop.add_argument("--resume", action="store_true", help="Continue the run in --run-dir.")
    loop.add_argument("--overwrite", action="store_true", help="Delete --run-dir first.")
    loop.add_argument("--fit", action="store_true", help="model.fit instead of the custom loop.")
    loop.add_argument("--strategy", default=None, choices=("default", "mirrored", "multiworker"))
    loop.add_argument("--mixed-precision", default=None, choices=("float16", "bfloat16"))
    loop.add_argument("--average-last", type=positive_int, default=None, metavar="N")
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
    return model_config, step_limited(train_config, args)


def step_limited(train_config: TrainConfig, args: argparse.Namespace) -> TrainConfig:
    """--max-steps without --epochs: the steps alone bound the run (see LIMITS_HELP)."""
    if args.max_steps is not None and args.epochs is None:
        return train_config.replace(epochs=NO_EPOCH_LIMIT)
    return train_config


def prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> bool:
    """Refuses to touch an existing run unless told to resume or overwrite it.

    Returns:
      Whether `run_dir` is to be cleared (--overwrite of an existing run); the caller does it
      once the data has loaded, so a bad dataset leaves the old run as it was.
    """
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
    return exists and overwrite


def _recorded(spec: str | None) -> str | None:
    """A data spec, tarball or data dir as config.json records it: local paths made absolute."""
    from tf_transformer.data.sources import TED_SPECS

    if spec is None or spec in ("sample", *TED_SPECS) or "://" in str(spec):
        return spec
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.exists() else str(spec)


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
    clear_run_dir: bool = False,
):
    """Loads the data, builds (or reloads) the tokenizers and trains in `run_dir`.

    A run directory that already has tokenizers and a config.json is resumed: its stored
    model config is used (`model_config` only supplies the sizes of a new run).
    `clear_run_dir` deletes `run_dir` first, once the data has loaded (nothing is written or
    deleted when it does not load).

    Returns:
      The `TrainResult` of the custom loop, or `(model, history)` of `model.fit`.
    """
    from tf_transformer.data import load_dataset
    from tf_transformer.data.pipeline import make_batches
    from tf_transformer.run_dir import RunDir
    from tf_transformer.text.tokenizers import build_tokenizers

    run = RunDir(run_dir)
    data = {"dataset": _recorded(str(dataset)), "tarball": _recorded(tarball)}
    data["data_dir"] = _recorded(data_dir)
    load = {"tarball": tarball, "data_dir": data_dir}
    train_pairs = load_dataset(dataset, "train", **load)
    val_pairs = load_dataset(dataset, "validation", **load)
    if clear_run_dir and run.root.exists():
        shutil.rmtree(run.root)
    if run.exists() and run.tokenizers_path.is_dir():
        stored = run.read_config()
        model_config = ModelConfig.from_dict(stored["model"])
        tokenizers = run.load_tokenizers()
    else:
        tokenizers = build_tokenizers(train_pairs, vocab_size=train_config.vocab_size)
        tokenizers.save(str(run.tokenizers_path))
        model_config = model_config.replace(
            input_vocab_size=int(tokenizers.source.get_vocab_size()),
            target_vocab_size=int(tokenizers.target.get_vocab_size()),
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
    from tf_transformer.run_dir import RunDir

    run_dir = Path(args.run_dir or f"runs/{args.preset}")
    clear = prepare_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)
    model_config, train_config = configs_from_args(args)
    data = {"dataset": args.dataset, "tarball": args.tarball, "data_dir": args.data_dir}
    if args.resume:
        stored = RunDir(run_dir).read_config()
        train_config = TrainConfig.from_dict(stored["train"]).replace(
            **_overrides(args, RESUME_FLAGS)
        )
        train_config = step_limited(train_config, args)
        # The run's own data; --tarball/--data-dir may say where it is now.
        recorded = stored.get("data", {})
        data["dataset"] = recorded.get("dataset") or args.dataset
        for key in ("tarball", "data_dir"):
            data[key] = data[key] or recorded.get(key)
    result = train_run(
        run_dir,
        model_config=model_config,
        train_config=train_config,
        use_fit=args.fit,
        progress=not args.quiet,
        clear_run_dir=clear,
        **data,
    )
    if args.fit:
        model, history = result
        steps = int(model.optimizer.iterations.numpy())
        print(f"fit done: step {steps} ({len(history.epoch)} epochs): {run_dir}")
    elif result.stopped_by in ("SIGINT", "SIGTERM"):
        print(
            f"stopped by {result.stopped_by} at step {result.step}; checkpoint "
            f"{result.checkpoint}. Continue with --resume --run-dir {run_dir}."
        )
    else:
        print(f"trained to step {result.step} (epoch {result.epoch}): {result.checkpoint}")
    return 0
