"""The benches' JSON figures: what bench/json_figures.py writes, and that the recorded data in
docs/benchmarks/data/ holds what bench/plot_results.py draws the docs' plots from."""

import argparse
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "benchmarks" / "data"
sys.path.insert(0, str(REPO / "bench"))

import json_figures
import plot_results

from tf_transformer.hardware.cpu import cpu_features


def test_write_json_records_command_date_machine_and_note(tmp_path, monkeypatch):
    monkeypatch.setattr(
        sys, "argv", [str(REPO / "bench" / "padding.py"), "--json-note", "loaded", "--x", "1"]
    )
    parser = argparse.ArgumentParser()
    json_figures.add_json_flags(parser)
    parser.add_argument("--x")
    args = parser.parse_args(sys.argv[1:] + ["--json", str(tmp_path / "out" / "p.json")])
    json_figures.write_json(args, "padding", {"rows": [{"ours": 0.25}]})
    record = json.loads((tmp_path / "out" / "p.json").read_text())
    assert record["bench"] == "padding" and record["note"] == "loaded"
    assert record["command"] == ".venv/bin/python bench/padding.py --x 1"
    assert record["figures"] == {"rows": [{"ours": 0.25}]}
    assert record["date"][:2] == "20" and record["machine"]["cpus"] >= 1
    # The CPU the figures were measured on: the one `tf_transformer.hardware.cpu` describes.
    cpu = record["machine"]["cpu"]
    assert cpu == cpu_features().to_dict() and cpu["cores"] >= 1 and cpu["model"]
    assert {"avx2", "avx512f", "avx512_bf16", "amx", "limited", "isa_limit"} <= set(cpu)
    assert all(isinstance(cpu[name], bool) for name in ("avx2", "avx512f", "avx512_bf16", "amx"))


def test_the_cpu_record_says_what_an_isa_limit_hides(tmp_path, monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    cpu = json_figures.machine()["cpu"]
    assert cpu["isa_limit"] == "AVX2" and cpu["avx512_bf16"] is False and cpu["amx"] is False
    assert set(cpu["limited"]) <= {"avx512f", "avx512_bf16", "amx"}


def test_without_json_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    json_figures.add_json_flags(parser)
    json_figures.write_json(parser.parse_args([]), "padding", {})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, kept",
    [
        (["--json-note", "a b", "--repeats", "3"], ["--repeats", "3"]),
        (["--json-note=a", "--json", "x.json"], ["--json", "x.json"]),
        (["--lengths", "40", "128"], ["--lengths", "40", "128"]),
    ],
)
def test_the_note_is_not_part_of_the_command(argv, kept):
    assert json_figures.without_note(argv) == kept


def test_every_plot_has_its_recorded_data():
    inputs = {name for names in plot_results.INPUTS.values() for name in names}
    recorded = {path.name for path in DATA.glob("*.json")}
    assert inputs <= recorded, inputs - recorded
    for name in recorded:
        record = json.loads((DATA / name).read_text())
        assert {"bench", "command", "date", "figures"} <= set(record), name
        assert record["command"].startswith(".venv/bin/python bench/"), name
    # Figures not measured by a bench's --json say so.
    table = json.loads((DATA / "quality_table.json").read_text())
    assert table["transcribed"] is True and "NOT measured" in table["note"]


def test_the_plots_are_drawn_from_the_recorded_data():
    figures = plot_results.figures(DATA)
    assert sorted(figures) == sorted(plot_results.PLOTS)
    for name, figure in figures.items():
        # The provenance line under the axes names each input's command.
        text = " ".join(t.get_text() for t in figure.texts)
        for source in plot_results.INPUTS[name]:
            command = json.loads((DATA / source).read_text())["command"].split(" --json")[0]
            assert command[:60].split(" (")[0] in text, (name, source)


TIMING_BENCHES = (
    "decode_speed",
    "ctranslate2_peer",
    "litert_peer",
    "train_throughput",
    "step_cost",
    "serving_latency",
    "serving_load",
    "quality",
    "data_scale",
)


@pytest.mark.parametrize("bench", TIMING_BENCHES)
def test_every_timing_bench_prints_its_cpu_first_not_last(bench):
    # Read from the source (running the benches takes minutes): `main` prints the CPU line right
    # after parsing its flags, so the last line stays the machine-readable one.
    import ast

    tree = ast.parse((REPO / "bench" / f"{bench}.py").read_text(encoding="utf-8"))
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = [
        i
        for i, statement in enumerate(main.body)
        if "print(describe_cpu()" in ast.unparse(statement)
    ]
    parsed = [i for i, s in enumerate(main.body) if "parser.parse_args(" in ast.unparse(s)]
    assert calls == [parsed[0] + 1], bench
