"""Padding saved by token-budget batches: the share of [PAD] in padded batches of 64 and in ours.

Run from the repository root::

    .venv/bin/python bench/padding.py [--corpus DIR SPLIT ...] [--json PATH]

For each corpus split: WordPiece vocabularies of `--vocab-size` (8,000) learnt from that split's
own text, then one pass over the split in our token-budget batches with length bucketing
(`make_batches`, `--token-budget` 4,096) and in the tutorial's batches of 64 padded to their
longest sentence (`padded_batches`), shuffle seed 0. The figure is the share of [PAD] among the
source and target tokens (`padding_fraction`); a padded token is computed and thrown away. By
default the splits of `../shared/data` that exist: Tatoeba train and dev, TED validation's dev.
The last line is machine-readable: `padding: <corpus>_<split>=<ours>/<padded> ...`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from json_figures import add_json_flags, write_json

DATA = REPO.parent / "shared" / "data"
DEFAULT_SPLITS = (
    ("tatoeba_pt_en", "train"),
    ("tatoeba_pt_en", "dev"),
    ("ted_hrlr_validation", "dev"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus",
        nargs=2,
        action="append",
        metavar=("DIR", "SPLIT"),
        help="A dataset spec (as --dataset takes it) and a split; repeatable. "
        "Default: Tatoeba train and dev and TED dev from ../shared/data.",
    )
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--token-budget", type=int, default=4096)
    add_json_flags(parser)
    args = parser.parse_args()

    from tf_transformer.data import load_dataset, make_batches, padded_batches, padding_fraction
    from tf_transformer.text.tokenizers import build_tokenizers

    corpora = args.corpus or [
        (str(DATA / name), split) for name, split in DEFAULT_SPLITS if (DATA / name).is_dir()
    ]
    if not corpora:
        sys.exit(f"error: no corpus given and {DATA} is absent; pass --corpus DIR SPLIT.")
    rows = []
    for spec, split in corpora:
        started = time.perf_counter()
        pairs = load_dataset(spec, split)
        tokenizers = build_tokenizers(pairs, vocab_size=args.vocab_size)
        ours = padding_fraction(
            make_batches(pairs, tokenizers, token_budget=args.token_budget, seed=0)
        )
        padded = padding_fraction(padded_batches(pairs, tokenizers, seed=0))
        name = f"{Path(spec).name}_{split}"
        rows.append(
            {"corpus": name, "pairs": sum(1 for _ in pairs), "ours": ours, "padded": padded}
        )
        print(
            f"{name:28s} token budget {args.token_budget}: {ours:6.1%} padding; "
            f"batches of 64: {padded:6.1%}  ({time.perf_counter() - started:.0f} s)"
        )
    print("padding: " + " ".join(f"{r['corpus']}={r['ours']:.3f}/{r['padded']:.3f}" for r in rows))
    write_json(
        args,
        "padding",
        {
            "token_budget": args.token_budget,
            "batch_size": 64,
            "vocab_size": args.vocab_size,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
