"""`tf-transformer evaluate RUN_DIR|SAVED_MODEL --dataset SPEC --split test`: sacreBLEU scores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tf_transformer.commands import (
    CHECKPOINT_HELP,
    add_decoding_arguments,
    decode_config,
    model_loading,
    positive_int,
)
from tf_transformer.config import DataConfig
from tf_transformer.errors import CLIError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="Translate a test split and score it with sacreBLEU (BLEU, chrF).",
        description=(
            "Translates the source side of a split, writes the hypotheses one per line, and "
            "prints sacreBLEU BLEU (cased, sacreBLEU's default, then lower-cased) and chrF with "
            "their signatures. Lower-cased, tokenized references (TED style: `do n't go .`) are "
            "detected and the hypotheses put in the same style before scoring. The last line "
            'is JSON: {"bleu": cased, "bleu_lc": lower-cased, "chrf": ...}.'
        ),
    )
    parser.add_argument(
        "model",
        metavar="RUN_DIR|EXPORT",
        help="A run directory, an exported SavedModel or a LiteRT export.",
    )
    parser.add_argument(
        "--dataset",
        default=None,
        help="sample | sample_written | ted_hrlr | PATH (default for a run directory: the "
        "dataset it was trained on, as its config.json records it, with its "
        "--tarball/--data-dir; required for a SavedModel, which does not record it).",
    )
    parser.add_argument(
        "--split",
        default="test",
        help="train|dev|validation|test; a directory of text files also takes any split it "
        "holds as files (devtest for devtest.pt/devtest.en).",
    )
    parser.add_argument("--tarball", default=None, help="TED: a copy of the original tarball.")
    parser.add_argument("--data-dir", default=None, help="TED: the TFDS data directory.")
    add_decoding_arguments(
        parser,
        "A run directory decodes with these; a SavedModel decodes as it was exported: it takes "
        "--beam-size 1 (its greedy signature) or its export's settings, and refuses others.",
    )
    parser.add_argument("--checkpoint", default=None, metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    parser.add_argument("--batch-size", type=positive_int, default=64, help="Sentences per batch.")
    parser.add_argument("--limit", type=positive_int, default=None, help="Only the first N pairs.")
    parser.add_argument(
        "--output",
        default=None,
        help="Hypotheses file (default: hypotheses.<dataset>.<split>.txt in the run directory, "
        "or in the working directory for a SavedModel).",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    parser.set_defaults(func=run)


def exported(path: str) -> bool:
    """`path` is an export of a registered backend (a version folder or a base path)."""
    from tf_transformer.backends import detect

    return detect(path) is not None


def evaluation_data(args: argparse.Namespace) -> tuple[DataConfig, str]:
    """The data to score on, and where it comes from.

    --dataset when given (the pt->en pair); else the run directory's own data (`RunDir`), with
    its language pair, each of its --tarball/--data-dir overridable by the flags.

    Raises:
      CLIError: a SavedModel (or a run without a recorded dataset) and no --dataset.
    """
    from tf_transformer.run_dir import RunDir

    paths = {"tarball": args.tarball, "data_dir": args.data_dir}
    paths = {name: value for name, value in paths.items() if value is not None}
    if args.dataset is not None:
        return DataConfig(dataset=args.dataset, **paths), "--dataset"
    if exported(args.model):
        raise CLIError(
            f"{args.model} is an export, which does not record the data "
            "it was trained on: pass --dataset sample|ted_hrlr|PATH."
        )
    run = RunDir(args.model)
    if not run.exists():
        return DataConfig(**paths), "--dataset"  # not a model at all: open_translator says so
    data = run.data_config()
    if data is None:
        raise CLIError(
            f"{run.config_path} records no dataset: pass --dataset sample|ted_hrlr|PATH."
        )
    if data.is_mix:
        raise CLIError(
            f"{run.config_path} records {len(data.dataset)} corpora (a mix): pass --dataset "
            "with the one to score on."
        )
    return data.replace(**paths), f"the run's dataset, from {run.config_path}"


def run(args: argparse.Namespace) -> int:
    from tf_transformer.backends import open_translator

    data, source = evaluation_data(args)
    # The model first: a wrong path fails before TensorFlow even loads.
    with model_loading(args.model):
        translator = open_translator(args.model, decode_config(args), checkpoint=args.checkpoint)
    from tf_transformer.inference.evaluate import evaluate

    (spec,) = data.dataset
    print(f"dataset: {spec} ({source}), split {args.split}", flush=True)
    dataset = data.load(args.split)
    if args.limit:
        dataset = dataset.take(args.limit)
    pairs = [(pt.decode(), en.decode()) for pt, en in dataset.as_numpy_iterator()]
    name = Path(spec).name or "data"
    # Beside a run; in the working directory for an export (its version dir stays clean).
    where = Path(".") if exported(args.model) else Path(args.model)
    output = Path(args.output or where / f"hypotheses.{name}.{args.split}.txt")
    scores, _ = evaluate(
        translator.translate,
        pairs,
        batch_size=args.batch_size,
        hypotheses_path=output,
        progress=not args.quiet,
    )
    print(f"{spec} {args.split} with {translator.description}")
    print(scores.summary())
    print(f"hypotheses: {output}")
    headline = {"bleu": scores.bleu, "bleu_lc": scores.bleu_lc, "chrf": scores.chrf}
    print(json.dumps({name: round(value, 2) for name, value in headline.items()}))
    sys.stdout.flush()
    return 0
