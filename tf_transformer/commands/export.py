"""`tf-transformer export RUN_DIR`: a TF Serving SavedModel version of a trained run."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path

from tf_transformer.commands import (
    CHECKPOINT_HELP,
    DEFAULT_MODEL_NAME,
    add_decoding_arguments,
    decode_config,
    model_loading,
    positive_int,
)
from tf_transformer.errors import CLIError, PathExistsError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help=f"Export a run as a TF Serving SavedModel (saved_models/{DEFAULT_MODEL_NAME}/VERSION).",
        description=(
            f"Writes saved_models/{DEFAULT_MODEL_NAME}/VERSION/{{saved_model.pb,variables,assets,"
            "assets.extra/tf_serving_warmup_requests} (or --out BASE/VERSION) with the "
            "signatures serving_default (beam search), greedy and attention: each export is the "
            "next version of the served model, and existing versions are never overwritten. TF Serving serves the highest version under the "
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
    parser.add_argument("--checkpoint", default=None, metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--format",
        choices=("savedmodel", "ctranslate2", "litert"),
        default="savedmodel",
        help="savedmodel (TF Serving, default); ctranslate2: a CTranslate2 model directory "
        "with the vocabularies, written to --out (default: saved_models/<RUN_DIR name>-ct2), "
        "needs `pip install '.[ctranslate2]'`; litert: the encoder and decoder step as LiteRT "
        "files with the vocabularies, the next version under --out (default: "
        "saved_models/<RUN_DIR name>-litert), run with `pip install '.[litert]'`.",
    )
    parser.add_argument(
        "--quantization",
        default=None,
        help="With --format ctranslate2: CTranslate2 weight quantization (e.g. int8, float16); "
        "with --format litert: none (float32, default) or int8 (dynamic range).",
    )
    add_decoding_arguments(
        parser,
        "Baked into the graph: --beam-size is serving_default's (the greedy signature is always "
        "there); translate and evaluate read them back and refuse other settings.",
    )
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="Decode with XLA (jit_compile kept in the SavedModel): several times faster per "
        "request; TF Serving compiles each (batch, source-length) bucket once, at load from the "
        "warm-up requests. On CPU the server needs --xla_cpu_compilation_enabled=true.",
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
    if args.format == "ctranslate2":
        return export_ctranslate2(args)
    if args.format == "litert":
        return export_litert(args)
    if args.quantization:
        raise CLIError("--quantization is for --format ctranslate2 or litert.")

    if args.warmup_batch_sizes and not args.jit_compile:
        # A graph export warms up with one request per signature: every shape runs alike.
        raise CLIError("--warmup-batch-sizes needs --jit-compile.")
    from tf_transformer.inference.serving.export import export_run_dir
    from tf_transformer.inference.serving.warmup import warmup_path

    out = args.out or str(Path("saved_models") / DEFAULT_MODEL_NAME)
    options = {
        "config": decode_config(args),
        "jit_compile": args.jit_compile or None,
        "warmup_batch_sizes": args.warmup_batch_sizes,
    }

    options = {k: v for k, v in options.items() if v is not None}
    path, source = export_checkpoint(args, export_run_dir, out, version=args.version, **options)
    print(f"Exported version {path.name} to {path} {source}")
    print(
        "Signatures: serving_default (beam search), greedy, attention"
        + ("; decoding compiled with XLA." if args.jit_compile else ".")
    )
    print(f"Warm-up requests (replayed by TF Serving at load): {warmup_path(path)}")
    print(serving_commands(Path(out), jit_compile=args.jit_compile))
    return 0


def serving_commands(base: Path, *, jit_compile: bool = False) -> str:
    """How to serve the model base path `base` and translate through the server."""
    name = base.name
    model_flag = "" if name == DEFAULT_MODEL_NAME else f" --model-name {shlex.quote(name)}"
    # TF Serving turns XLA's CPU JIT off unless asked: every compilation, and so the load's
    # warm-up, would fail with "XLA compilation disabled".
    xla_flag = " --xla_cpu_compilation_enabled=true" if jit_compile else ""
    return (
        f"Serve it (TF Serving serves the highest version under {base}):\n"
        f"  tensorflow_model_server --rest_api_port=8501 --model_name={shlex.quote(name)} "
        f"--model_base_path={shlex.quote(str(base.resolve()))}{xla_flag}\n"
        "Then translate through the server:\n"
        f'  tf-transformer translate --server http://localhost:8501{model_flag} "o gato bebe ."\n'
        "Or without a server:\n"
        f'  tf-transformer translate {shlex.quote(str(base))} "o gato bebe ."'
    )


def export_checkpoint(
    args: argparse.Namespace, export: Callable[..., Path], out: Path | str, **options
) -> tuple[Path, str]:
    """Inside `model_loading`: `export(RUN_DIR, out, checkpoint=PREFIX, **options)` with the
    run's checkpoint that --checkpoint picks ("not a run directory" is said before "no
    checkpoint").

    Returns:
      The export's path, and where it came from: "from the best checkpoint PREFIX".
    """
    from tf_transformer.run_dir import RunDir

    with model_loading(args.run_dir):
        run = RunDir(args.run_dir)
        run.read_config()
        which, checkpoint = run.checkpoint(args.checkpoint)
        path = export(args.run_dir, out, checkpoint=checkpoint, **options)
    return path, f"from the {which} checkpoint {checkpoint}"


def refuse_saved_model_flags(args: argparse.Namespace, form: str, flags: tuple[str, ...]) -> None:
    """One error line naming the SavedModel options given (`flags` and
    --warmup-batch-sizes), which the export `--format form` has no use for."""
    given = [
        flag
        for flag in (*flags, "--warmup-batch-sizes")
        if getattr(args, flag.lstrip("-").replace("-", "_"))
    ]
    if given:
        raise CLIError(f"{', '.join(given)}: SavedModel options, not for --format {form}.")


def export_ctranslate2(args: argparse.Namespace) -> int:
    """`--format ctranslate2`: the run's weights and vocabularies as a CTranslate2 model."""
    import importlib.util

    refuse_saved_model_flags(args, "ctranslate2", ("--jit-compile", "--version"))
    if decode_config(args).given():
        raise CLIError(
            "a CTranslate2 model takes its decoding settings at translation time "
            "(ctranslate2.Translator.translate_batch): drop the decoding flags."
        )
    if importlib.util.find_spec("ctranslate2") is None:
        raise CLIError("--format ctranslate2 needs CTranslate2: pip install '.[ctranslate2]'.")
    from tf_transformer.inference.serving.ctranslate2_export import export_ctranslate2 as convert

    out = Path(args.out or Path("saved_models") / f"{Path(args.run_dir).resolve().name}-ct2")
    if out.exists():
        raise PathExistsError(f"{out} exists; a CTranslate2 export is never overwritten.")
    path, source = export_checkpoint(args, convert, out, quantization=args.quantization)
    print(f"Exported a CTranslate2 model to {path} {source}")
    return 0


def export_litert(args: argparse.Namespace) -> int:
    """`--format litert`: a LiteRT version folder (`inference.litert.export`)."""
    from tf_transformer.inference.litert.export import QUANTIZATIONS

    refuse_saved_model_flags(args, "litert", ("--jit-compile",))
    quantization = args.quantization or "none"
    if quantization not in QUANTIZATIONS:
        raise CLIError(
            f"--quantization {quantization}: --format litert takes {' or '.join(QUANTIZATIONS)}."
        )
    from tf_transformer.inference.litert.export import export_litert_run_dir

    out = Path(args.out or Path("saved_models") / f"{Path(args.run_dir).resolve().name}-litert")
    path, source = export_checkpoint(
        args,
        export_litert_run_dir,
        out,
        version=args.version,
        quantization=quantization,
        config=decode_config(args),
    )
    print(f"Exported LiteRT version {path.name} ({quantization}) to {path} {source}")
    print(
        f'Translate with it (ai-edge-litert, no TensorFlow): tf-transformer translate {shlex.quote(str(out))} "o gato bebe ."'
    )
    return 0
