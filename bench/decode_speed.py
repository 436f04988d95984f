"""Decoding speed: our cached greedy / beam search against the tutorial's recompute decoder.

Run from the repository root::

    .venv/bin/python bench/decode_speed.py [--repeats 5] [--sentences 3] [--jit-compile auto]
        [--step-layout xla|litert|both] [--json PATH]
    .venv/bin/python bench/decode_speed.py --run-dir runs/NAME [--lengths 40] [--json PATH]

Both decoders get the same source sentences (random ids, the tutorial preset: vocab 7765/7010,
random weights: speed does not depend on training) in the same process, at batch 1, and generate
exactly N tokens (ours bans END until N, the baseline has no END stop). Calls alternate A B A B;
the figures are medians of per-pair ratios, as ../shared/bench/README.md asks. The last line is
machine-readable: the speed-ups over the baseline, beam 4 against greedy (with the XLA setting
chosen per length), and `graph_ms_per_token`: the graph-mode (no XLA) greedy decoder's time per
generated token at the first length, encoder and setup included (median call time / N). The line
above it gives beam 4 against greedy in graph mode when XLA was chosen.

`--step-layout` picks the XLA decoders' one-token step (`make_decode_fn(step_layout=...)`):
"xla" (the default under XLA: heads-merged caches, attention as products and sums) or "litert"
(graph mode's per-head caches and batched matmuls, a position written as XLA can).

`--run-dir RUN` times a trained run's model instead (its best, else averaged, else latest
checkpoint; random source ids in its vocabulary, 20 tokens): greedy at batch 1 in graph mode and
with XLA, N tokens generated exactly, lengths capped by the model's positional table. No
baseline: the last line is `run: graph_ms_per_token=... xla_ms_per_token=...` (median call time
/ N at the first length, encoder and setup included), to compare two presets' models (the
recipe's against `small-data`'s). "both" runs everything with "xla" and
also times the two under XLA against each other, interleaved (greedy and beam 4 at every
length, same ids checked), in a line `step_layout: greedy_40=... beam4_40=...` (litert-layout
time over xla-layout time: above 1 = the xla layout faster) above the last two lines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO.parent / "shared" / "bench"))

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tf_transformer.backends.litert.layout import LiteRTLayout
from tf_transformer.config import get_preset
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.model import Transformer

# `--step-layout`'s names: make_decode_fn's "xla", and the LiteRT export's layout class.
STEP_LAYOUTS = {"xla": "xla", "litert": LiteRTLayout}


def timed(fn, src) -> float:
    start = time.perf_counter()
    out = fn(src)
    tf.nest.map_structure(lambda t: t.numpy(), out)  # wait for the result
    return time.perf_counter() - start


def interleaved(a, b, sources, repeats: int) -> tuple[list[float], list[float]]:
    """Times `a` and `b` alternately on every source; returns both lists of seconds."""
    times_a, times_b = [], []
    for _ in range(repeats):
        for src in sources:
            times_a.append(timed(a, src))
            times_b.append(timed(b, src))
    return times_a, times_b


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


def beam_vs_greedy(model, greedy, n: int, jit: bool, sources, args, record=None) -> float:
    """Median ratio of beam-4 to greedy call times (interleaved), exactly `n` tokens; the
    median times go to the list `record` too when given (the --json figures)."""
    beam = make_decode_fn(
        model,
        max_new_tokens=n,
        min_length=n,
        beam_size=4,
        length_penalty=0.6,
        jit_compile=jit,
        step_layout=step_layout(jit, args),
    )
    for src in sources:
        timed(beam, src)
    t_beam, t_greedy = interleaved(beam, greedy, sources, args.repeats)
    ratio = median_ratio(t_beam, t_greedy)
    if record is not None:
        record.append(
            {
                "tokens": n,
                "xla": jit,
                "beam4_ms": statistics.median(t_beam) * 1000,
                "greedy_ms": statistics.median(t_greedy) * 1000,
                "beam4_vs_greedy": ratio,
            }
        )
    print(
        f"beam 4 {n:4d} tokens  xla={jit!s:5}: "
        f"{statistics.median(t_beam) * 1000:7.1f} ms vs greedy "
        f"{statistics.median(t_greedy) * 1000:7.1f} ms, {ratio:4.2f}x"
    )
    return ratio


def step_layout(jit: bool, args) -> str | type | None:
    """The step layout of our decoder: `--step-layout` under XLA ("xla" for "both")."""
    if not jit or args.step_layout is None:
        return None  # make_decode_fn's default: "xla" under XLA, "graph" otherwise
    return STEP_LAYOUTS["xla" if args.step_layout == "both" else args.step_layout]


def compare_step_layouts(model, sources, args) -> dict[str, float]:
    """XLA decoders with the "litert" (per-head) and the "xla" step layout, interleaved: median
    ratios of litert-layout to xla-layout call times (above 1 = the xla layout faster)."""
    ratios = {}
    for n in args.lengths:
        for beam in (1, 4):
            fns = [
                make_decode_fn(
                    model,
                    max_new_tokens=n,
                    min_length=n,
                    beam_size=beam,
                    length_penalty=0.6,
                    jit_compile=True,
                    step_layout=STEP_LAYOUTS[layout],
                )
                for layout in ("litert", "xla")
            ]
            for src in sources:
                ids = [fn(src).ids.numpy() for fn in fns]  # compile, and the same ids
                assert (ids[0] == ids[1]).all(), f"step layouts disagree: {ids}"
            t_heads, t_xla = interleaved(*fns, sources, args.repeats)
            name = f"{'greedy' if beam == 1 else 'beam4'}_{n}"
            ratios[name] = median_ratio(t_heads, t_xla)
            print(
                f"{name:11s} xla=True : litert layout {statistics.median(t_heads) * 1000:7.1f} ms, "
                f"xla layout {statistics.median(t_xla) * 1000:7.1f} ms, {ratios[name]:4.2f}x"
            )
    return ratios


def time_run(args) -> None:
    """`--run-dir`: greedy ms per generated token of a trained run, graph mode and XLA."""
    from tf_transformer.run_dir import RunDir

    model = RunDir(args.run_dir).load_model()
    config = model.config
    rng = np.random.default_rng(0)
    sources = [
        tf.constant([[2, *rng.integers(4, config.input_vocab_size, size=20), 3]], tf.int64)
        for _ in range(args.sentences)
    ]
    lengths = sorted({min(n, model.config.max_length - 1) for n in args.lengths})
    print(
        f"run {args.run_dir}: {config.num_layers} layers, d_model {config.d_model}, vocab "
        f"{config.input_vocab_size}/{config.target_vocab_size}; batch 1, greedy, "
        f"{args.sentences} sentences x {args.repeats} repeats"
    )
    figures = {"run_dir": str(args.run_dir), "greedy": []}
    for n in lengths:
        for jit in (False, True):
            greedy = make_decode_fn(model, max_new_tokens=n, min_length=n, jit_compile=jit)
            for src in sources:
                timed(greedy, src)  # trace / compile per shape
            times = [timed(greedy, src) for _ in range(args.repeats) for src in sources]
            ms_per_token = statistics.median(times) * 1000 / n
            figures["greedy"].append({"tokens": n, "xla": jit, "ms_per_token": ms_per_token})
            print(f"greedy {n:4d} tokens  xla={jit!s:5}: {ms_per_token:6.2f} ms/token")
    first = {row["xla"]: row["ms_per_token"] for row in figures["greedy"][:2]}
    print(f"run: graph_ms_per_token={first[False]:.2f} xla_ms_per_token={first[True]:.2f}")
    figures.update(batch=1, tokens=lengths[0])
    write_json(args, "decode_speed", figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run-dir", default=None, help="Time a trained run's model (no baseline comparison)."
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[40, 128])
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="XLA for our decoder; auto measures both at the first length and keeps the faster.",
    )
    parser.add_argument(
        "--graph-beam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time beam 4 against greedy in graph mode at every length XLA was chosen for.",
    )
    parser.add_argument(
        "--step-layout",
        choices=("litert", "xla", "both"),
        default=None,
        help="the XLA decoders' step layout (default xla); both: also time litert against xla.",
    )
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    if args.run_dir:
        return time_run(args)
    started = time.perf_counter()

    import baseline  # ../shared/bench/baseline.py

    tf.keras.utils.set_random_seed(0)
    config = get_preset("tutorial")
    model = Transformer.from_config(config)
    model.build()
    reference = baseline.BaselineTransformer()
    rng = np.random.default_rng(0)
    sources = []
    for _ in range(args.sentences):
        body = rng.integers(4, config.input_vocab_size, size=20)
        sources.append(tf.constant([[2, *body, 3]], tf.int64))  # batch 1, 22 tokens
    with warnings.catch_warnings():
        # The baseline's `Block` (../shared/bench/baseline.py: the tutorial's, not ours) has no
        # `build()`, and Keras 3 says so once per block as this call builds them. Our layers
        # build their sublayers (`layers.stack.SublayerBlock.build`).
        warnings.filterwarnings("ignore", r"`build\(\)` was called on layer 'block", UserWarning)
        reference((sources[0], sources[0][:, :1]))  # build
    print(f"tutorial preset, batch 1, {args.sentences} sentences x {args.repeats} repeats")

    jit_options = {"auto": [False, True], "on": [True], "off": [False]}[args.jit_compile]
    ratios = {}
    chosen_jit = {}
    graph_ratios = {}
    graph_ms_per_token = None
    figures = {"greedy": [], "beam": []}  # the --json figures: median ms per call
    for n in args.lengths:
        theirs = baseline.greedy_decode_recompute(reference, sources[0], steps=n)
        timed(theirs, sources[0])  # trace
        best = None
        graph_greedy = None
        for jit in jit_options:
            ours = make_decode_fn(
                model,
                max_new_tokens=n,
                min_length=n,
                jit_compile=jit,
                step_layout=step_layout(jit, args),
            )
            for src in sources:
                timed(ours, src)  # trace / compile per shape
            out = ours(sources[0])
            assert out.ids.shape == (1, n + 1), out.ids.shape  # exactly n generated tokens
            t_ours, t_theirs = interleaved(ours, theirs, sources, args.repeats)
            ratio = median_ratio(t_theirs, t_ours)
            figures["greedy"].append(
                {
                    "tokens": n,
                    "xla": jit,
                    "ours_ms": statistics.median(t_ours) * 1000,
                    "baseline_ms": statistics.median(t_theirs) * 1000,
                    "speedup": ratio,
                }
            )
            print(
                f"greedy {n:4d} tokens  xla={jit!s:5}: ours {n / statistics.median(t_ours):8.0f} "
                f"tok/s, baseline {n / statistics.median(t_theirs):6.0f} tok/s, "
                f"speed-up {ratio:5.1f}x"
            )
            if not jit:
                graph_greedy = ours
                if graph_ms_per_token is None:
                    graph_ms_per_token = statistics.median(t_ours) * 1000 / n
            if best is None or ratio > best[0]:
                best = (ratio, jit, ours)
        ratios[f"greedy_{n}"], chosen_jit[n], greedy = best
        jit_options = [chosen_jit[n]]
        ratios[f"beam4_vs_greedy_{n}"] = beam_vs_greedy(
            model, greedy, n, chosen_jit[n], sources, args, figures["beam"]
        )
        if chosen_jit[n] and (graph_greedy is not None or args.graph_beam):
            if graph_greedy is None:
                graph_greedy = make_decode_fn(model, max_new_tokens=n, min_length=n)
            graph_ratios[n] = beam_vs_greedy(
                model, graph_greedy, n, False, sources, args, figures["beam"]
            )
    if graph_ms_per_token is None:  # XLA only: time the graph decoder at the first length
        n = args.lengths[0]
        graph = make_decode_fn(model, max_new_tokens=n, min_length=n)
        timed(graph, sources[0])
        times = [timed(graph, src) for _ in range(args.repeats) for src in sources]
        graph_ms_per_token = statistics.median(times) * 1000 / n
    if graph_ratios:
        print(
            "graph mode: "
            + " ".join(f"beam4_vs_greedy_{n}={r:.2f}" for n, r in graph_ratios.items())
        )
    if args.step_layout == "both":
        layouts = compare_step_layouts(model, sources, args)
        print("step_layout: " + " ".join(f"{name}={r:.2f}" for name, r in layouts.items()))
    first = args.lengths[0]
    fields = [f"greedy_{n}={ratios[f'greedy_{n}']:.1f}" for n in args.lengths]
    fields.append(f"beam4_vs_greedy={ratios[f'beam4_vs_greedy_{first}']:.2f}")
    fields += [f"beam4_vs_greedy_{n}={ratios[f'beam4_vs_greedy_{n}']:.2f}" for n in args.lengths]
    fields.append(f"graph_ms_per_token={graph_ms_per_token:.2f}")
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    print("ratios: " + " ".join(fields))
    ratios_line = {k: float(v) for k, v in (field.split("=") for field in fields)}
    figures.update(ratios=ratios_line, batch=1, preset="tutorial")
    write_json(args, "decode_speed", figures)


if __name__ == "__main__":
    main()
