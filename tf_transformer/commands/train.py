"""`tf-transformer train`: flags to configs, then `tf_transformer.training.run`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tf_transformer.commands.flags import (
    add_config_flags,
    config_changes,
    show_defaults,
)
from tf_transformer.config import (
    PRESETS,
    DataConfig,
    ModelConfig,
    TrainConfig,
    get_preset,
    get_train_preset,
)
from tf_transformer.errors import CLIError

# ModelConfig fields without a flag: training sets them (the vocabulary sizes from the
# tokenizers; the positional table at least --max-tokens long).
SET_BY_TRAINING = ("input_vocab_size", "target_vocab_size", "max_length")
# The flags that are not config fields: which run, and how to run this command.
RUN_FLAGS = ("preset", "run_dir", "resume", "overwrite", "fit", "quiet")

LIMITS_HELP = (
    "Training stops at whichever comes first of the limits given on the command line: "
    "--epochs, --max-steps, --max-minutes. The preset's epochs apply only when neither "
    "--epochs nor --max-steps is given (with --resume: the run's stored epochs)."
)
PRESET_HELP = (
    "The model and training flags change the preset's settings one by one; their defaults "
    "shown are preset {}'s (`train --preset NAME --help` shows another's)."
)


class PresetAction(argparse.Action):
    """--preset NAME: also makes the help show that preset's values as the defaults."""

    def __init__(self, *args, group, config_actions, **kwargs):
        super().__init__(*args, **kwargs)
        self.group, self.config_actions = group, config_actions

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        self.show(values)

    def show(self, name: str) -> None:
        show_defaults(self.config_actions, get_preset(name), get_train_preset(name))
        self.group.description = PRESET_HELP.format(name)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="Train a Transformer into a run directory (or resume one).",
        description=(
            "Builds WordPiece tokenizers from the training split, then trains and checkpoints "
            "into RUN_DIR/{config.json,tokenizers,checkpoints,logs}. SIGINT/SIGTERM save a "
            "checkpoint and exit; --resume continues from it. " + LIMITS_HELP
        ),
    )
    this_run = parser.add_argument_group("run")
    data = parser.add_argument_group("data")
    add_config_flags(data, DataConfig)
    model = parser.add_argument_group("model (paper names)")
    training = parser.add_argument_group("training")
    config_actions = [
        *add_config_flags(model, ModelConfig, skip=SET_BY_TRAINING),
        *add_config_flags(training, TrainConfig),
    ]
    preset = this_run.add_argument(
        "--preset",
        default="small",
        choices=sorted(PRESETS),
        action=PresetAction,
        group=model,
        config_actions=config_actions,
        help="Model and training settings (default: small).",
    )
    preset.show(preset.default)
    this_run.add_argument("--run-dir", default=None, help="Default: runs/PRESET.")
    this_run.add_argument("--resume", action="store_true", help="Continue the run in --run-dir.")
    this_run.add_argument("--overwrite", action="store_true", help="Delete --run-dir first.")
    this_run.add_argument(
        "--fit", action="store_true", help="model.fit instead of the custom loop."
    )
    this_run.add_argument("--quiet", action="store_true", help="No progress bars.")
    parser.set_defaults(func=run)


def configs_from_args(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig]:
    """The model and training configs of a new run: the preset, then the flags given."""
    from tf_transformer.training.start.resume import apply_train_changes  # imports TensorFlow

    model_config = get_preset(args.preset).replace(**config_changes(args, ModelConfig))
    train_config = apply_train_changes(
        get_train_preset(args.preset), config_changes(args, TrainConfig)
    )
    model_config = model_config.replace(
        max_length=max(model_config.max_length, train_config.max_tokens)
    )
    return model_config, train_config


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuses to touch an existing run unless told to resume or overwrite it."""
    if resume and overwrite:
        raise CLIError("--resume and --overwrite exclude each other.")
    from tf_transformer.training.start.lock import LOCK_NAME

    exists = run_dir.exists() and any(p.name != LOCK_NAME for p in run_dir.iterdir())
    if resume and not (run_dir / "config.json").is_file():
        raise CLIError(f"--resume: {run_dir} is not a run directory (no config.json).")
    if exists and not resume and not overwrite:
        raise CLIError(
            f"{run_dir} already exists; pass --resume to continue it or --overwrite to start over."
        )


def data_from_args(args: argparse.Namespace, run=None) -> DataConfig | None:
    """The data flags as a `DataConfig`; None for a resumed run given no data flags (its own).

    `run` is the run's `RunDir`, which a resume needs: the run's data, which the flags may say
    lives elsewhere now.
    """
    given = config_changes(args, DataConfig)
    if args.resume:
        if not given:
            return None
        return (run.data_config() or DataConfig()).replace(**given)
    return DataConfig(**given)


def run(args: argparse.Namespace) -> int:
    from tf_transformer import training
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.result import StopReason

    args.run_dir = args.run_dir or f"runs/{args.preset}"
    run_dir = Path(args.run_dir)
    check_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)
    run = RunDir(run_dir)  # the one RunDir of the command, passed on
    model_changes = config_changes(args, ModelConfig)
    if args.resume:
        # The run's own configs, with the flags given: `training.run` refuses what a resume may
        # not change.
        model_config = run.model_config().replace(**model_changes) if model_changes else None
        train_config, changes = None, config_changes(args, TrainConfig)
    else:
        (model_config, train_config), changes = configs_from_args(args), None
    result = training.run(
        run,
        data_from_args(args, run),
        model_config,
        train_config,
        fit=args.fit,
        overwrite=args.overwrite,
        train_changes=changes,
        progress=not args.quiet,
    )
    if result.stopped_by is not None and result.stopped_by.by_signal:
        print(
            f"stopped by {result.stopped_by} at step {result.step}; checkpoint "
            f"{result.checkpoint}. Continue with --resume --run-dir {run_dir}."
        )
    else:
        how = "fit" if args.fit else "trained"
        why = " (stopped by patience)" if result.stopped_by == StopReason.PATIENCE else ""
        print(f"{how} to step {result.step} (epoch {result.epoch}){why}: {result.checkpoint}")
    if result.evaluations:
        best = run.best_record()
        print(
            f"validation: {len(result.evaluations)} evaluations, {result.eval_seconds:.1f} s; "
            f"best BLEU {best['bleu']:.1f} at step {best['step']}: {result.best_checkpoint}"
        )
    return 0
