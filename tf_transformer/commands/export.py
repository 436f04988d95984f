"""`tf-transformer export RUN_DIR`: a TF Serving SavedModel version of a trained run."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="Export a run as a TF Serving SavedModel (saved_models/NAME/VERSION).",
        description=(
            "Writes saved_models/NAME/VERSION/{saved_model.pb,variables,assets} with the "
            "signatures serving_default (beam search), greedy and attention. Existing versions "
            "are never overwritten."
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The trained run directory.")
    parser.add_argument(
        "--out",
        default=None,
        help="Model base path (default: saved_models/<name of RUN_DIR>).",
    )
    parser.add_argument(
        "--version", type=int, default=None, help="Version number (default: the next free one)."
    )
    parser.add_argument(
        "--checkpoint", default=None, help="A checkpoint prefix (default: the run's latest)."
    )
    parser.add_argument(
        "--beam-size", type=int, default=None, help="Beams of serving_default (default: 4)."
    )
    parser.add_argument(
        "--max-length", type=int, default=None, help="Most generated tokens per sentence."
    )
    parser.add_argument(
        "--length-penalty", type=float, default=None, help="Beam-search length penalty alpha."
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tf_transformer.export import export_run_dir

    out = args.out or str(Path("saved_models") / Path(args.run_dir).resolve().name)
    options = {
        "beam_size": args.beam_size,
        "max_length": args.max_length,
        "length_penalty": args.length_penalty,
    }
    path = export_run_dir(
        args.run_dir,
        out,
        version=args.version,
        checkpoint=args.checkpoint,
        **{k: v for k, v in options.items() if v is not None},
    )
    print(f"Exported version {path.name} to {path}")
    print(
        "Signatures: serving_default (beam search), greedy, attention. Serve with:\n"
        f"  tensorflow_model_server --rest_api_port=8501 --model_name={Path(out).name} "
        f"--model_base_path={Path(out).resolve()}"
    )
    return 0
