"""`tf-transformer export RUN_DIR`: a TF Serving SavedModel version of a trained run."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from tf_transformer.commands import DEFAULT_MODEL_NAME, model_loading, positive_int


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help=f"Export a run as a TF Serving SavedModel (saved_models/{DEFAULT_MODEL_NAME}/VERSION).",
        description=(
            f"Writes saved_models/{DEFAULT_MODEL_NAME}/VERSION/{{saved_model.pb,variables,assets}} "
            "(or --out BASE/VERSION) with the signatures serving_default (beam search), greedy "
            "and attention: each export is the next version of the served model, and existing "
            "versions are never overwritten. TF Serving serves the highest version under the "
            f"base path; `translate --server` asks for the model name {DEFAULT_MODEL_NAME!r} by "
            "default. Prints the commands that serve and query it."
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The trained run directory.")
    parser.add_argument(
        "--out",
        default=None,
        metavar="BASE",
        help=f"Model base path (default: saved_models/{DEFAULT_MODEL_NAME}); its last component "
        "is the model name to serve it under.",
    )
    parser.add_argument(
        "--version",
        type=positive_int,
        default=None,
        help="Version number (default: the next free one).",
    )
    parser.add_argument(
        "--checkpoint", default=None, help="A checkpoint prefix (default: the run's latest)."
    )
    parser.add_argument(
        "--beam-size",
        type=positive_int,
        default=None,
        help="Beams of serving_default (default: 4).",
    )
    parser.add_argument(
        "--max-length", type=positive_int, default=None, help="Most generated tokens per sentence."
    )
    parser.add_argument(
        "--length-penalty", type=float, default=None, help="Beam-search length penalty alpha."
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tf_transformer.export import export_run_dir

    out = args.out or str(Path("saved_models") / DEFAULT_MODEL_NAME)
    options = {
        "beam_size": args.beam_size,
        "max_length": args.max_length,
        "length_penalty": args.length_penalty,
    }
    with model_loading(args.run_dir):
        path = export_run_dir(
            args.run_dir,
            out,
            version=args.version,
            checkpoint=args.checkpoint,
            **{k: v for k, v in options.items() if v is not None},
        )
    print(f"Exported version {path.name} to {path}")
    print("Signatures: serving_default (beam search), greedy, attention.")
    print(serving_commands(Path(out)))
    return 0


def serving_commands(base: Path) -> str:
    """How to serve the model base path `base` and translate through the server."""
    name = base.name
    model_flag = "" if name == DEFAULT_MODEL_NAME else f" --model-name {shlex.quote(name)}"
    return (
        f"Serve it (TF Serving serves the highest version under {base}):\n"
        f"  tensorflow_model_server --rest_api_port=8501 --model_name={shlex.quote(name)} "
        f"--model_base_path={shlex.quote(str(base.resolve()))}\n"
        "Then translate through the server:\n"
        f'  tf-transformer translate --server http://localhost:8501{model_flag} "o gato bebe ."\n'
        "Or without a server:\n"
        f'  tf-transformer translate {shlex.quote(str(base))} "o gato bebe ."'
    )
