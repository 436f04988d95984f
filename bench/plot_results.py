"""The docs' benchmark plots, drawn from the JSON the benches wrote with `--json PATH`.

Run from the repository root::

    .venv/bin/python bench/plot_results.py [--data docs/benchmarks/data] [--out plots/]

`make docs` does not need this command: the docs' build hook (docs/hooks/figures.py) calls
`figures()` and puts the PNGs into the site. Each plot says under it which command produced its
data and when, read from the JSON records (bench/json_figures.py). The plots:

* `decoding_speed.png`: one sentence, greedy, 40 and 128 generated tokens: the tutorial's
  recompute decoder, ours in graph mode and under XLA (bench/decode_speed.py), CTranslate2
  float32 and int8 (bench/ctranslate2_peer.py), and our LiteRT export float32 and int8
  (bench/litert_peer.py) when `litert_peer.json` is in the data folder;
* `serving_latency.png`: the exported SavedModel, graph and XLA export, greedy and beam 4, at
  batch 1 and 32 (bench/serving_latency.py);
* `validation_bleu.png`: dev BLEU against training steps for the `small-data` recipe: a short
  run recorded by bench/quality.py, and the runs of the table in docs/benchmarks/quality.md
  (transcribed there, labelled as such);
* `padding.png`: the share of [PAD] tokens in padded batches of 64 and in token-budget batches
  (bench/padding.py);
* `data_scale.png`: peak memory, time to the first step and tokens/s of a training process
  against the corpus size (bench/data_scale.py).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a command-line script: never a window (not imported by notebooks)
import matplotlib.pyplot as plt
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/, also when imported by path
from json_figures import without_note

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "benchmarks" / "data"

# What each plot reads (files in the data folder).
INPUTS = {
    "decoding_speed.png": (
        "decode_speed_graph.json",
        "decode_speed_xla.json",
        "ctranslate2_peer.json",
    ),
    "serving_latency.png": ("serving_latency.json",),
    "validation_bleu.png": ("quality_short.json", "quality_table.json"),
    "padding.png": ("padding.json",),
    "data_scale.png": ("data_scale.json",),
}
# What a plot adds when the file is there (bench/litert_peer.py --json).
OPTIONAL_INPUTS = {"decoding_speed.png": ("litert_peer.json",)}


def load(data: Path, name: str) -> dict:
    return json.loads((data / name).read_text(encoding="utf-8"))


def provenance(records: list[dict]) -> str:
    """'Data: <command> (<date>, load <x> on <n> cores; <note>)' for each record, wrapped."""
    lines = []
    for record in records:
        where = record.get("machine", {})
        when = record["date"][:16].replace("T", " ") + (" UTC" if "T" in record["date"] else "")
        details = [when]
        if "load_average_1m" in where:
            details.append(f"load {where['load_average_1m']:.1f} on {where['cpus']} cores")
        command = record["command"]
        if "--json-note" in command:  # written before json_figures dropped the note from it
            command = shlex.join(without_note(shlex.split(command)))
        line = f"{command}  ({', '.join(details)})"
        lines += textwrap.wrap(line, 150, subsequent_indent="    ")
    notes = {record["note"] for record in records if record.get("note")}
    for note in sorted(notes):
        lines += textwrap.wrap(f"Note: {note}", 150, subsequent_indent="    ")
    return "\n".join(["Data:"] + lines)


def finish(figure, records: list[dict]):
    """Puts the provenance under the axes."""
    text = provenance(records)
    lines = text.count("\n") + 1
    height = figure.get_figheight()
    figure.subplots_adjust(bottom=(0.12 * lines + 0.6) / height)
    figure.text(0.01, 0.01, text, fontsize=7, family="monospace", va="bottom", ha="left")
    return figure


def decoding_speed(data: Path):
    graph, xla, ct2 = (load(data, name) for name in INPUTS["decoding_speed.png"])
    lengths = (40, 128)

    def greedy_ms(record, key):
        rows = {row["tokens"]: row for row in record["figures"]["greedy"]}
        return [rows[n][key] for n in lengths]

    ct2_rows = {(c["tokens"], c["beam"]): c["ms"] for c in ct2["figures"]["cases"]}
    series = {
        "tutorial's decoder (recomputes the prefix)": greedy_ms(graph, "baseline_ms"),
        "ours, graph mode": greedy_ms(graph, "ours_ms"),
        "ours, XLA": greedy_ms(xla, "ours_ms"),
        "CTranslate2 float32 (1 thread)": [ct2_rows[(n, 1)]["ct2_fp32"] for n in lengths],
        "CTranslate2 int8 (1 thread)": [ct2_rows[(n, 1)]["ct2_int8"] for n in lengths],
    }
    records = [graph, xla, ct2]
    (optional,) = OPTIONAL_INPUTS["decoding_speed.png"]
    if (data / optional).is_file():
        litert = load(data, optional)
        rows = {c["tokens"]: c["ms"] for c in litert["figures"]["cases"] if c["beam"] == 1}
        if all(n in rows for n in lengths):
            series["LiteRT float32 (1 thread)"] = [rows[n]["litert_fp32"] for n in lengths]
            series["LiteRT int8 (1 thread)"] = [rows[n]["litert_int8"] for n in lengths]
            records.append(litert)
    figure, axes = plt.subplots(figsize=(10, 6))
    width = 0.8 / len(series)
    x = np.arange(len(lengths))
    for i, (label, values) in enumerate(series.items()):
        bars = axes.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label)
        axes.bar_label(bars, fmt="%.1f", fontsize=7)
    axes.set_yscale("log")
    axes.set_xticks(x, [f"{n} tokens" for n in lengths])
    axes.set_ylabel("ms per sentence (median, log scale)")
    axes.set_title(
        "Greedy decoding, one 22-token source, tutorial preset (random weights): lower is faster"
    )
    axes.legend(fontsize=8, loc="upper left")
    return finish(figure, records)


def serving_latency(data: Path):
    (record,) = (load(data, name) for name in INPUTS["serving_latency.png"])
    figures = record["figures"]
    batch = figures["batch"]
    figure, panels = plt.subplots(1, 2, figsize=(10, 5))
    for axes, (title, suffix) in zip(
        panels, (("1 sentence", ""), (f"batch of {batch}", f"_b{batch}"))
    ):
        cases = ("greedy", "beam4")
        x = np.arange(len(cases))
        for i, kind in enumerate(("graph", "xla")):
            values = [figures[f"{kind}_{case}{suffix}_p50_ms"] for case in cases]
            label = {"graph": "graph export", "xla": "XLA export (export --jit-compile)"}[kind]
            bars = axes.bar(x + (i - 0.5) * 0.38, values, 0.38, label=label)
            axes.bar_label(bars, fmt="%.1f", fontsize=8)
        axes.set_xticks(x, ["greedy", "beam 4"])
        axes.set_title(title)
        axes.set_ylabel("p50 latency, ms")
    for axes in panels:
        axes.set_ylim(0, axes.get_ylim()[1] * 1.25)  # room for the legend above the bars
    panels[0].legend(fontsize=8, loc="upper left")
    figure.suptitle(
        f"Exported SavedModel, {figures['source_tokens']}-token sentence, "
        f"{figures['generated_tokens']} tokens generated ({figures['model']})",
        fontsize=10,
    )
    return finish(figure, [record])


def validation_bleu(data: Path):
    short, table = (load(data, name) for name in INPUTS["validation_bleu.png"])
    figure, panels = plt.subplots(1, 2, figsize=(11, 6), sharey=True)
    history = short["figures"]["validation"]
    panels[0].plot([row["step"] for row in history], [row["bleu"] for row in history], marker="o")
    best = short["figures"].get("best") or {}
    sentences = f" on {best['num_sentences']} sentences" if "num_sentences" in best else ""
    record = short["figures"]["record"]
    steps = record.get("step", history[-1]["step"] if history else "?")
    minutes = f", {record['minutes_used']:.0f} minutes" if "minutes_used" in record else ""
    panels[0].set_title(
        f"A short run recorded for these pages ({steps} steps{minutes})", fontsize=10
    )
    panels[0].set_ylabel("dev BLEU (cased, greedy)")
    for name, run in table["figures"]["runs"].items():
        points = sorted((int(step), bleu) for step, bleu in run["bleu"].items())
        panels[1].plot(*zip(*points), marker=".", label=f"{name}: {run['change']}")
    panels[1].set_title("Runs recorded in the quality table (27-minute budgets)", fontsize=10)
    panels[1].legend(fontsize=7, loc="lower right")
    for axes in panels:
        axes.set_xlabel("training step")
        axes.grid(alpha=0.3)
    panels[0].set_ylim(bottom=0)
    figure.suptitle(
        "small-data recipe: Tatoeba dev BLEU while training, greedy"
        f"{sentences} (trained on Tatoeba + CrioleSet)",
        fontsize=10,
    )
    return finish(figure, [short, table])


def padding(data: Path):
    (record,) = (load(data, name) for name in INPUTS["padding.png"])
    figures = record["figures"]
    rows = figures["rows"]
    figure, axes = plt.subplots(figsize=(10, 2.2 + 0.9 * len(rows)))
    y = np.arange(len(rows))
    for i, (key, label) in enumerate(
        (
            ("padded", f"padded batches of {figures['batch_size']} (the tutorial)"),
            (
                "ours",
                f"token-budget batches with length buckets ({figures['token_budget']} tokens)",
            ),
        )
    ):
        values = [100 * row[key] for row in rows]
        bars = axes.barh(y + (0.5 - i) * 0.38, values, 0.38, label=label)
        axes.bar_label(bars, fmt="%.1f%%", fontsize=8)
    axes.set_yticks(y, [f"{row['corpus']} ({row['pairs']:,} pairs)" for row in rows])
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("share of [PAD] among source and target tokens, %: computed and thrown away")
    axes.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2)
    figure.subplots_adjust(left=0.3)
    return finish(figure, [record])


def data_scale(data: Path):
    (record,) = (load(data, name) for name in INPUTS["data_scale.png"])
    rows = list(record["figures"]["sizes"].values())
    pairs = [row["pairs"] / 1e6 for row in rows]
    figure, panels = plt.subplots(1, 3, figsize=(12, 3.4))
    for axes, (key, title) in zip(
        panels,
        (
            ("rss_gb_train", "peak resident memory, GB"),
            ("first_step_s", "process start to first step, s"),
            ("tokens_per_s", "training target tokens/s"),
        ),
    ):
        axes.plot(pairs, [row[key] for row in rows], "o-")
        axes.set_xscale("log")
        axes.minorticks_off()
        axes.set_xticks(pairs, [f"{p:g}M" for p in pairs])
        axes.set_xlabel("corpus, pairs")
        axes.set_title(title, fontsize=9)
        axes.set_ylim(bottom=0)
    figure.suptitle(
        f"Streaming a growing corpus: preset {record['figures']['preset']}, "
        f"{record['figures']['steps']} steps, tokenizers reused",
        fontsize=10,
        y=1.02,
    )
    return finish(figure, [record])


PLOTS = {
    "decoding_speed.png": decoding_speed,
    "serving_latency.png": serving_latency,
    "validation_bleu.png": validation_bleu,
    "padding.png": padding,
    "data_scale.png": data_scale,
}


def figures(data: Path = DATA) -> dict:
    """`{file name: matplotlib Figure}` for every plot whose JSON is in `data`."""
    made = {}
    for name, plot in PLOTS.items():
        if all((data / source).is_file() for source in INPUTS[name]):
            made[name] = plot(data)
            plt.close(made[name])
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="Folder of the benches' JSON.")
    parser.add_argument("--out", type=Path, default=Path("plots"), help="Where to write PNGs.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    made = figures(args.data)
    for name, figure in made.items():
        figure.savefig(args.out / name, dpi=100, bbox_inches="tight")
        print(args.out / name)
    missing = sorted(set(PLOTS) - set(made))
    if missing:
        print(f"no data for: {', '.join(missing)} (see INPUTS in {Path(__file__).name})")


if __name__ == "__main__":
    main()
