"""bench/quality.py end to end on a tiny corpus: a run resumes where it stopped, evaluation from
the run directory alone is reproducible, and an existing run is never overwritten."""

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tf_transformer.data.sample import sample_pairs

pytestmark = [pytest.mark.cost(210), pytest.mark.processes]  # cost: seconds in make test (measured)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "quality.py"
# The layout bench/quality.py reads from ../shared/data: folders of aligned {split}.pt/.en files.
LAYOUT = {
    "tatoeba_pt_en": {"train": 48, "dev": 6},
    "crioleset": {"train": 16},
    "ted_hrlr_validation": {"dev": 4},
}
TINY = [
    "--num-layers", "1", "--d-model", "32", "--num-heads", "2", "--dff", "64", "--vocab-size", "200", "--token-budget", "256", "--max-tokens", "24",
    "--checkpoint-every", "5", "--beam-size", "2", "--quiet",
]  # fmt: skip


def _write_corpora(root: Path, layout: dict[str, dict[str, int]]) -> None:
    pairs = iter(sample_pairs("train", size=100))
    for folder, splits in layout.items():
        (root / folder).mkdir(parents=True)
        for split, count in splits.items():
            chosen = [next(pairs) for _ in range(count)]
            for lang, column in (("pt", 0), ("en", 1)):
                text = "".join(pair[column] + "\n" for pair in chosen)
                (root / folder / f"{split}.{lang}").write_text(text, encoding="utf-8")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )


def _quality(*args: str) -> subprocess.CompletedProcess:
    result = _run(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _calls(folder: Path, calls: dict[str, list[str]]) -> dict[str, SimpleNamespace]:
    """Several `bench/quality.py ARGS` in one process (tests/quality_calls.py): name -> result
    (returncode, stdout, stderr), for calls that need no fresh process of their own."""
    (folder / "calls.json").write_text(json.dumps(list(calls.values())))
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "quality_calls.py"), str(folder / "calls.json")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: SimpleNamespace(**r) for name, r in zip(calls, json.loads(done.stdout))}


def _last_line(result) -> str:
    return result.stdout.strip().splitlines()[-1]


MIXED_LAYOUT = {
    "tatoeba_pt_en": {"train": 20, "dev": 3},
    "crioleset": {"train": 10},
    "python_docs_pt_en": {"train": 20, "dev": 3},
    "gnome_debian_docs_pt_en": {"train": 10},
    "tldr_pt_en": {"train": 10},
    "ntrex_news": {"dev": 3},
    "ted_hrlr_validation": {"dev": 3},
}


@pytest.fixture(scope="module")
def new_runs(tmp_path_factory):
    """The two runs that start from nothing, in one process (neither needs a fresh one): the
    tiny run's first 10 steps, and 4 steps of the mixed preset validated at step 4. Returns
    {"tiny": (data, run_dir), "mixed": (data, run_dir)} and the calls' results by the same names."""
    root = tmp_path_factory.mktemp("quality")
    folders = {"tiny": (root / "data", root / "run"), "mixed": (root / "mdata", root / "mrun")}
    _write_corpora(folders["tiny"][0], LAYOUT)
    _write_corpora(folders["mixed"][0], MIXED_LAYOUT)
    (data, run_dir), (mixed_data, mixed_run) = folders.values()
    calls = {
        "tiny": [
            "--data", str(data), "--run-dir", str(run_dir), "--max-steps", "10", *TINY,
            "--beam-size", "1", "--skip-ted",  # the first evaluation is not checked: keep it short
        ],
        "mixed": [
            "--preset", "mixed-data", "--data", str(mixed_data), "--run-dir", str(mixed_run),
            "--max-steps", "4", "--eval-every", "4", *TINY, "--beam-size", "1",
        ],
    }  # fmt: skip
    return folders, _calls(root, calls)


@pytest.fixture(scope="module")
def tiny_run(new_runs):
    """Trains 10 steps (`new_runs`), then resumes to 20 in a new process; returns (data,
    run_dir, the resumed call's output)."""
    folders, results = new_runs
    data, run_dir = folders["tiny"]
    first = results["tiny"]
    assert first.returncode == 0, first.stderr[-3000:]
    assert "trained: step 10" in first.stdout
    resumed = _quality(
        "--data", str(data), "--run-dir", str(run_dir), "--resume", "--max-steps", "20",
        "--beam-size", "2", "--quiet",
    )  # fmt: skip
    return data, run_dir, resumed


BAD_FLAGS = [
    (["--beam-size", "1", "--length-penalties", "0.6,1.0"], "needs beam search"),
    (["--length-penalty", "1.0", "--length-penalties", "0.6,1.0"], "give one of them"),
    (["--length-penalties", "0.6,0.6"], "distinct"),
    (["--checkpoint", "runs/none/ckpt-1"], "cannot read the checkpoint runs/none/ckpt-1"),
]


@pytest.fixture(scope="module")
def later_calls(tiny_run, tmp_path_factory):
    """The calls after the resumed run, in this order in one process of their own (none needs a
    fresh one): evaluation again from the run directory, --checkpoint latest with two length
    penalties, each of BAD_FLAGS, and a new run over the existing one. Also the files they must
    leave as they were, read before: {"best hypotheses": {name: text}, "config": text}."""
    data, run_dir, _ = tiny_run
    folder = tmp_path_factory.mktemp("later_calls")
    before = {
        "best hypotheses": {
            p.name: p.read_text() for p in (run_dir / "hypotheses" / "best").iterdir()
        },
        "config": (run_dir / "config.json").read_text(),
    }
    evaluate = ["--data", str(data), "--eval-only", str(run_dir)]
    penalties = [
        *evaluate, "--checkpoint", "latest", "--beam-size", "2", "--length-penalties", "1.0,0.6",
        "--skip-ted", "--quiet", "--json", str(folder / "q.json"), "--json-note", "a tiny run",
    ]  # fmt: skip
    calls = {
        "again": [*evaluate, "--beam-size", "2", "--quiet"],
        "penalties": penalties,
        **{f"bad {i}": [*evaluate, "--quiet", *flags] for i, (flags, _) in enumerate(BAD_FLAGS)},
        "over": ["--data", str(data), "--run-dir", str(run_dir), *TINY],
    }
    return _calls(folder, calls), before, folder / "q.json"


def test_resume_continues_from_the_checkpoint(tiny_run):
    _, run_dir, resumed = tiny_run
    assert "trained: step 20," in resumed.stdout
    record = json.loads((run_dir / "quality.json").read_text())
    assert record["step"] == 20
    assert 0 < record["minutes_used"] < record["budget"] == 27.0
    assert (run_dir / "checkpoints" / "ckpt-20.index").is_file()


def test_evaluation_is_reproducible_from_the_run_dir(tiny_run, later_calls):
    _, run_dir, resumed = tiny_run
    results, before, _ = later_calls
    line = _last_line(resumed)
    assert re.match(r"quality: tatoeba_dev_bleu=\S+ tatoeba_dev_bleu_lc=\S+ chrf=\S+ ", line)
    assert "ted_dev_bleu_lc=" in line and line.endswith("steps=20")
    # No evaluation in 20 steps, but the end of the first call scored its averaged checkpoint and,
    # with nothing to beat, kept it as the best: RunDir.checkpoint's first choice.
    assert "the best checkpoint (best > averaged > latest)" in resumed.stdout
    best = json.loads((run_dir / "checkpoints" / "best" / "best.json").read_text())
    assert best["source"].startswith("averaged last ") and best["step"] == 10
    written = before["best hypotheses"]
    assert sorted(written) == [
        "tatoeba_dev.1.0.txt", "tatoeba_dev.2.1.txt", "ted_dev.1.0.txt", "ted_dev.2.1.txt",
    ]  # fmt: skip
    assert len(written["tatoeba_dev.1.0.txt"].splitlines()) == LAYOUT["tatoeba_pt_en"]["dev"]
    again = results["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert _last_line(again) == line
    hypotheses = run_dir / "hypotheses" / "best"
    assert {path.name: path.read_text() for path in hypotheses.iterdir()} == written


def test_eval_only_checkpoint_and_length_penalties(tiny_run, later_calls):
    _, run_dir, _ = tiny_run
    results, _, json_path = later_calls
    result = results["penalties"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the latest checkpoint (--checkpoint)" in result.stdout
    assert re.search(
        r"cased BLEU by length penalty: 1: \S+, 0\.6: \S+; best length penalty (1|0\.6)\n",
        result.stdout,
    )
    written = sorted(path.name for path in (run_dir / "hypotheses" / "latest").iterdir())
    assert written == ["tatoeba_dev.1.0.txt", "tatoeba_dev.2.0.6.txt", "tatoeba_dev.2.1.txt"]
    # The last line reports the first length penalty: its row of the table.
    row = re.search(r"\| tatoeba_dev \| beam2 lp=1 \| (\S+) \| (\S+) \| (\S+) \|", result.stdout)
    line = _last_line(result)
    assert line.startswith(
        f"quality: tatoeba_dev_bleu={row[1]} tatoeba_dev_bleu_lc={row[2]} chrf={row[3]} minutes="
    )
    assert line.endswith(" steps=20")
    # --json: the same scores, the run's record and the command (the note kept apart).
    record = json.loads(json_path.read_text())
    assert record["bench"] == "quality" and record["note"] == "a tiny run"
    assert "bench/quality.py --data" in record["command"] and "--json-note" not in record["command"]
    figures = record["figures"]
    assert figures["record"]["step"] == 20 and figures["validation"] == []
    scores = {(s["dev"], s["decoding"]): s["bleu"] for s in figures["scores"]}
    assert list(scores) == [("tatoeba_dev", n) for n in ("greedy", "beam2 lp=1", "beam2 lp=0.6")]
    assert f"{scores[('tatoeba_dev', 'beam2 lp=1')]:.1f}" == row[1]


@pytest.mark.parametrize("index", range(len(BAD_FLAGS)), ids=lambda i: BAD_FLAGS[i][1])
def test_eval_only_bad_flags(later_calls, index):
    result = later_calls[0][f"bad {index}"]
    assert result.returncode != 0
    assert BAD_FLAGS[index][1] in result.stderr


def test_an_existing_run_is_refused_untouched(tiny_run, later_calls):
    _, run_dir, _ = tiny_run
    results, before, _ = later_calls
    result = results["over"]
    assert result.returncode != 0
    assert "exists; pass --resume" in result.stderr
    assert (run_dir / "config.json").read_text() == before["config"]
    assert (run_dir / "checkpoints" / "ckpt-20.index").is_file()


@pytest.mark.slow
def test_the_mixed_preset_trains_on_its_mix_and_scores_four_dev_sets(new_runs):
    folders, results = new_runs
    _, run_dir = folders["mixed"]
    result = results["mixed"]
    assert result.returncode == 0, result.stderr[-3000:]
    recorded = json.loads((run_dir / "config.json").read_text())["data"]
    assert [Path(p).name for p in recorded["dataset"]] == list(MIXED_LAYOUT)[:5]
    assert recorded["dataset_weights"] == [0.3, 0.1, 0.35, 0.15, 0.1]
    assert (
        json.loads((run_dir / "checkpoints" / "best" / "best.json").read_text())["picked_by"]
        == "ntrex_news"
    )
    line = _last_line(result)
    for field in (
        "tatoeba_dev_bleu=",
        "ted_dev_bleu_lc=",
        "ntrex_dev_bleu=",
        "python_docs_dev_bleu=",
    ):
        assert field in line, line
