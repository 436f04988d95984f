"""A bench's figures as JSON (`--json PATH`), the input of bench/plot_results.py.

Every bench adds the same two flags with `add_json_flags(parser)` and ends with
`write_json(args, "decode_speed", figures)` (`from json_figures import ...`). The record says what produced the figures and
where: the command line as run from the repository root, the date, the machine's CPU, load and
core count, and an optional note (`--json-note "shared machine: ..."`). A plot without its command
and date is not evidence, so bench/plot_results.py prints both under every figure.

    {"bench": "decode_speed", "command": ".venv/bin/python bench/decode_speed.py ...",
     "date": "2026-11-25T13:05:00+00:00", "machine": {...}, "note": "...", "figures": {...}}
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def add_json_flags(parser: argparse.ArgumentParser) -> None:
    """Adds `--json PATH` and `--json-note TEXT` to a bench's parser."""
    parser.add_argument(
        "--json", metavar="PATH", default=None, help="Also write the figures as JSON to PATH."
    )
    parser.add_argument(
        "--json-note",
        metavar="TEXT",
        default="",
        help="A note kept with the JSON figures (e.g. how loaded the machine was).",
    )


def without_note(argv: list[str]) -> list[str]:
    """`argv` without `--json-note TEXT`: the note is kept in its own field."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--json-note":
            skip = True
        elif not arg.startswith("--json-note="):
            kept.append(arg)
    return kept


def command_line() -> str:
    """This process's command as typed from the repository root (without the note)."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(REPO)
    except ValueError:
        pass
    return shlex.join([".venv/bin/python", str(script), *without_note(sys.argv[1:])])


def machine() -> dict:
    """What the figures depend on besides the code: the CPU (model, cores, the instruction sets
    that decide bfloat16's speed, `tf_transformer.hardware.cpu`), load, versions."""
    import tensorflow as tf

    from tf_transformer.hardware.cpu import cpu_features

    return {
        "cpu": cpu_features().to_dict(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "gpus": len(tf.config.list_physical_devices("GPU")),
    }


def write_json(args: argparse.Namespace, bench: str, figures: dict) -> None:
    """Writes `figures` with their provenance to `args.json` (nothing without `--json`)."""
    if not args.json:
        return
    record = {
        "bench": bench,
        "command": command_line(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "note": args.json_note,
        "figures": figures,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    # stderr: a bench's last line on stdout stays its machine-readable one.
    print(f"figures written to {path}", file=sys.stderr)
