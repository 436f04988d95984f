"""What a training step costs for variants of a preset's model, against the preset's own.

Run from the repository root::

    .venv/bin/python bench/step_cost.py --preset mixed-data \\
        --variant layers3:num_layers=3 \\
        --variant vocab16k:input_vocab_size=15092,target_vocab_size=15092

For choosing a preset by comparisons at equal steps: a variant that gains at equal steps but
costs more a step makes fewer steps in the same minutes. Each model (the preset's, then each
`--variant NAME:FIELD=VALUE,...` of `ModelConfig` fields) is built under the training preset's
mixed-precision policy with its optimizer, and trains on one fixed batch of random ids
(`--batch 32x32`: 1,024 tokens, the `mixed-data` token budget). After 3 warm-up steps, each
model's `--steps` steps are timed in turn, `--rounds` times, in one process: the figures are the
medians of the per-round ratios to the preset's model, so load on the machine cancels. The last
line: `step_cost: NAME=ratio ...` (above 1: dearer than the preset's model); `--json PATH`
writes the figures as JSON too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tf_transformer.config import get_preset, get_train_preset
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep


def parse_variant(text: str) -> tuple[str, dict]:
    """`NAME:FIELD=VALUE,...` into (NAME, {FIELD: int or float or str})."""
    name, _, fields = text.partition(":")
    changes = {}
    for item in filter(None, fields.split(",")):
        field, _, value = item.partition("=")
        for kind in (int, float, str):
            try:
                changes[field] = kind(value)
                break
            except ValueError:
                continue
    if not name or not changes:
        raise SystemExit(f"--variant {text!r}: give NAME:FIELD=VALUE[,FIELD=VALUE...]")
    return name, changes


def make_step(preset: str, name: str, changes: dict, shape: tuple[int, int]):
    """A variant's `TrainStep.train_step` and its batch."""
    try:
        model_config = get_preset(preset).replace(**changes)
    except (TypeError, ValueError) as error:
        fields = ", ".join(changes)
        raise SystemExit(f"--variant {name}: {fields}: {error}; give ModelConfig fields") from None
    train_config = get_train_preset(preset)
    model = build_model(model_config, train_config.mixed_precision)
    optimizer = make_optimizer(model_config.d_model, train_config)
    optimizer.build(model.trainable_variables)
    step = TrainStep(model, optimizer, label_smoothing=train_config.label_smoothing)
    rng = np.random.default_rng(0)
    vocab = min(model_config.input_vocab_size, model_config.target_vocab_size)
    src, tgt_in, tgt_out = (tf.constant(rng.integers(3, vocab, shape)) for _ in range(3))
    batch = ((src, tgt_in), tgt_out)
    for _ in range(3):
        step.train_step(batch)
    return step.train_step, batch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mixed-data")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:FIELD=VALUE,...")
    parser.add_argument("--batch", default="32x32", help="sentences x tokens (default 32x32)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    add_json_flags(parser)
    args = parser.parse_args(argv)
    print(describe_cpu(), flush=True)  # what the figures were measured on
    shape = tuple(int(n) for n in args.batch.split("x"))
    variants = {"preset": {}, **dict(parse_variant(text) for text in args.variant)}
    steps = {
        name: make_step(args.preset, name, changes, shape) for name, changes in variants.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, (train_step, batch) in steps.items():
            started = time.perf_counter()
            for _ in range(args.steps):
                sums = train_step(batch)
            float(sums["loss_sum"])  # waits for the last step
            seconds[name].append((time.perf_counter() - started) / args.steps)
    ratios = {}
    for name, times in seconds.items():
        ratios[name] = statistics.median(a / b for a, b in zip(times, seconds["preset"]))
        print(f"{name}: {statistics.median(times) * 1000:.1f} ms a step, {ratios[name]:.2f}x")
    milliseconds = {name: statistics.median(times) * 1000 for name, times in seconds.items()}
    write_json(args, "step_cost", {"ratios": ratios, "ms_a_step": milliseconds})
    print("step_cost: " + " ".join(f"{n}={r:.2f}" for n, r in ratios.items() if n != "preset"))


if __name__ == "__main__":
    main()
