"""`tf-transformer evaluate RUN_DIR|SAVED_MODEL --dataset SPEC --split test`: sacreBLEU scores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="Translate a test split and score it with sacreBLEU (BLEU, chrF).",
        description=(
            "Translates the source side of a split, writes the hypotheses one per line, and "
            "prints sacreBLEU BLEU (lower-cased and cased) and chrF with their signatures. "
            "TED-style references (lower-cased, clitics split: `do n't`) are detected and the "
            "hypotheses put in the same style before scoring."
        ),
    )
    parser.add_argument(
        "model", metavar="RUN_DIR|SAVED_MODEL", help="A run directory or an exported SavedModel."
    )
    parser.add_argument("--dataset", default="sample", help="Data spec (default: sample).")
    parser.add_argument("--split", default="test", help="train|dev|validation|test.")
    parser.add_argument("--tarball", default=None, help="TED: a copy of the original tarball.")
    parser.add_argument("--data-dir", default=None, help="TED: the TFDS data directory.")
    parser.add_argument("--beam-size", type=int, default=4, help="1 = greedy (default: 4).")
    parser.add_argument("--length-penalty", type=float, default=0.6, help="Beam search alpha.")
    parser.add_argument("--max-length", type=int, default=None, help="Most tokens generated.")
    parser.add_argument("--checkpoint", default=None, help="latest|averaged|a checkpoint prefix.")
    parser.add_argument("--batch-size", type=int, default=64, help="Sentences per batch.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N pairs.")
    parser.add_argument(
        "--output",
        default=None,
        help="Hypotheses file (default: hypotheses.<dataset>.<split>.txt in the run directory, "
        "or in the working directory for a SavedModel).",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        raise ValueError("--batch-size and --limit must be at least 1.")
    from tf_transformer.load import load_translate_fn, saved_model_version

    # The model first: a wrong path fails before TensorFlow even loads.
    translate, description = load_translate_fn(
        args.model,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        max_length=args.max_length,
        checkpoint=args.checkpoint,
    )
    from tf_transformer.data import load_dataset
    from tf_transformer.evaluate import evaluate

    dataset = load_dataset(args.dataset, args.split, tarball=args.tarball, data_dir=args.data_dir)
    if args.limit:
        dataset = dataset.take(args.limit)
    pairs = [(pt.decode(), en.decode()) for pt, en in dataset.as_numpy_iterator()]
    name = Path(str(args.dataset)).name or "data"
    # Beside a run; in the working directory for a SavedModel (its version dir stays clean).
    where = Path(".") if saved_model_version(args.model) else Path(args.model)
    output = Path(args.output or where / f"hypotheses.{name}.{args.split}.txt")
    scores, _ = evaluate(
        translate,
        pairs,
        batch_size=args.batch_size,
        hypotheses_path=output,
        progress=not args.quiet,
    )
    print(f"{args.dataset} {args.split} with {description}")
    print(scores.summary())
    print(f"hypotheses: {output}")
    print(json.dumps({"bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2)}))
    sys.stdout.flush()
    return 0
