"""`tf-transformer export RUN_DIR [--format NAME]`: a trained run as one of the registered
backends' exports (`tf_transformer.backends.REGISTRY`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tf_transformer.backends import REGISTRY, backend
from tf_transformer.backends.base import export_arguments
from tf_transformer.commands import (
    CHECKPOINT_HELP,
    DEFAULT_MODEL_NAME,
    add_decoding_arguments,
    decode_config,
    model_loading,
    positive_int,
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help=f"Export a run: a TF Serving SavedModel (saved_models/{DEFAULT_MODEL_NAME}/VERSION), "
        "a CTranslate2 model or LiteRT files.",
        description=(
            f"--format savedmodel (default) writes saved_models/{DEFAULT_MODEL_NAME}/VERSION/"
            "{saved_model.pb,variables,assets,assets.extra/tf_serving_warmup_requests} (or "
            "--out BASE/VERSION) with the signatures serving_default (beam search), greedy and "
            "attention: each export is the next version of the served model, and existing "
            "versions are never overwritten. TF Serving serves the highest version under the "
            f"base path; `translate --server` asks for the model name {DEFAULT_MODEL_NAME!r} by "
            "default. Prints the commands that run what it wrote."
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The trained run directory.")
    parser.add_argument(
        "--out",
        default=None,
        metavar="BASE",
        help=f"Where to write (default: saved_models/{DEFAULT_MODEL_NAME} for a SavedModel, "
        "whose last component is the model name to serve it under; see --format).",
    )
    parser.add_argument(
        "--version",
        type=positive_int,
        default=None,
        help="Version number (savedmodel, litert; default: the next free one).",
    )
    parser.add_argument("--checkpoint", default=None, metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--format",
        choices=[b.name for b in REGISTRY],
        default=REGISTRY[0].name,
        help="; ".join(b.help for b in REGISTRY) + ".",
    )
    parser.add_argument(
        "--quantization",
        default=None,
        help="ctranslate2: CTranslate2's weight type (e.g. int8, float16); litert: none "
        "(float32, default) or int8 (dynamic range).",
    )
    add_decoding_arguments(
        parser,
        "savedmodel: baked into the graph: --beam-size is serving_default's (the greedy "
        "signature is always there); translate and evaluate read them back and refuse other "
        "settings. ctranslate2, litert: the defaults a translator starts from; the caps are the "
        "most it may ask.",
    )
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="savedmodel: decode with XLA (jit_compile kept in the SavedModel): several times "
        "faster per request; TF Serving compiles each (batch, source-length) bucket once, at "
        "load from the warm-up requests. On CPU the server needs "
        "--xla_cpu_compilation_enabled=true.",
    )
    parser.add_argument(
        "--warmup-batch-sizes",
        type=batch_sizes,
        default=None,
        metavar="N,N,...",
        help="With --jit-compile: the batch sizes (powers of two) the warm-up requests compile "
        "for every source length bucket (default: 1,2,4,8,16,32). A request's batch is padded "
        "to the next power of two; one above the largest warmed compiles on first use.",
    )
    parser.set_defaults(func=run)


def batch_sizes(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated powers of two, e.g. `1,2,4`."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated integers, got {text!r}"
        ) from None
    bad = [n for n in sizes if n < 1 or n & (n - 1)]
    if bad:
        raise argparse.ArgumentTypeError(f"must be powers of two, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    """Exports the run's checkpoint that --checkpoint picks with the --format backend."""
    from tf_transformer.run_dir import RunDir

    chosen = backend(args.format)
    args.config = decode_config(args)
    options = export_arguments(args, chosen)  # refuses what this backend does not take
    run_dir = Path(args.run_dir)
    out = Path(args.out) if args.out else chosen.default_out(run_dir)
    with model_loading(args.run_dir):
        run = RunDir(args.run_dir)
        run.read_config()  # "not a run directory" before "no checkpoint"
        which, checkpoint = run.checkpoint(args.checkpoint)
        path = chosen.export(run_dir, out, checkpoint=checkpoint, **options)
    version = f" version {path.name}" if path.name.isdigit() else ""
    print(f"Exported {chosen.name}{version} to {path} from the {which} checkpoint {checkpoint}")
    print(chosen.report(path, out, options))
    return 0
