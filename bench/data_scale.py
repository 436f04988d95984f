"""Data at scale: memory, tokenizer time, time to the first step and tokens/s against corpus size.

Run from the repository root (10 million pairs are 1.7 GB of text in TMPDIR or --tmp)::

    .venv/bin/python bench/data_scale.py                      # 0.1, 1, 4 and 10 million pairs
    .venv/bin/python bench/data_scale.py --sizes 0.1 1 4 10 --reuse-tokenizers   # ~6 minutes
    .venv/bin/python bench/data_scale.py --sizes 0.1 1 --json data_scale.json

The tokenizer build dominates: on a 2-core AMD EPYC with AVX-512 it took 94 s at 1 million
pairs and 97 s at 10 million (every size from 1 million on draws a sample of about a million
pairs, from 10 million in random runs of lines), so the default run takes about 10 minutes of
builds; with `--reuse-tokenizers` the four sizes took 6 minutes.

For each size (in millions of pairs) it writes a synthetic pt-en corpus directory,
`train.pt`/`train.en` and `dev.pt`/`dev.en` (1,000 pairs), in a temporary folder that is deleted
at the end. The lines are real sentence pairs (the training files of `../shared/data`, else the
embedded `sample` corpus) with one word on each side replaced by a word drawn from a Zipf law
over the side's real words and made-up words (a real word and a suffix), so the number of
distinct words grows with the corpus as it does in real text; the source and target stay
aligned line by line but are not translations of each other.

Each size is measured in two fresh processes, each reporting its own peak resident memory
(`getrusage(RUSAGE_SELF).ru_maxrss`, TensorFlow included):

* vocab: `Mix.load` (the corpus found and checked, as `train` does it), then the package's own
  tokenizer build, `training.start.inputs.prepare_tokenizers` with the `tiny` preset's settings
  (vocabularies of 2,000, `--vocab-sample` 1,000,000: the whole corpus at 0.1 million, a sample
  of about a million pairs above). `vocab_s` is the build alone, `check_s` the check.
  With `--reuse-tokenizers` the tokenizers are learnt at the first size only and the other
  sizes reuse them (no vocab process, no `vocab_s` for them).
* train: `training.run` (what `tf-transformer train` calls) with the `tiny` preset and
  `max_steps` 51, in a run directory that already holds the tokenizers the vocab process of the
  same size built (or the first size's, with `--reuse-tokenizers`), so they are reused, not
  learnt. `first_step_s` is the wall time from starting the process (Python, `import
  tensorflow`, the corpus check, the model and the traced step) to the end of the first step;
  `tokens_per_s` counts the target tokens of steps 2-51 over their wall time.

`rss_gb` is the larger peak of the two processes; both are printed. The last line is
machine-readable::

    data_scale: rss_gb_0.1m=1.00 rss_gb_1m=1.10 rss_gb_4m=1.26 rss_gb_10m=1.30
      rss_growth_gb=0.30 vocab_s_0.1m=146.8 first_step_s_0.1m=8.6 first_step_s_1m=8.3 ...
      tokens_per_s_0.1m=41750 tokens_per_s_1m=44789 ...

(one line, here cut): one `<figure>_<size>m=<value>` for each figure and size measured (sizes
as given), and `rss_growth_gb`, the last size's peak minus the first's; `vocab_s` only for the
sizes whose tokenizers were learnt. A benchmark prints numbers, it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data"
SOURCES = ("tatoeba_pt_en", "python_docs_pt_en", "gnome_debian_docs_pt_en", "tldr_pt_en")
PRESET = "tiny"
STEPS = 51  # the first one traces; tokens/s over the 50 after it
DEV_PAIRS = 1000
CHUNK = 200_000  # lines generated and written at a time
MADE_UP = 1_000_000  # words of each side's Zipf law, the real ones first
SUFFIXES = ("ado", "ção", "mente", "ista", "eiro", "ismo", "ante", "oso", "ível", "dade")
SUFFIXES_EN = ("ed", "tion", "ly", "ist", "er", "ism", "ant", "ous", "able", "ness")


# --- The corpus -------------------------------------------------------------------------------


def base_pairs() -> tuple[list[list[str]], list[list[str]]]:
    """Real sentence pairs, as word lists: the shared corpora's training files, else `sample`."""
    pt, en = [], []
    for name in SOURCES:
        folder = SHARED / name
        if (folder / "train.pt").is_file():
            pt += (folder / "train.pt").read_text(encoding="utf-8").splitlines()
            en += (folder / "train.en").read_text(encoding="utf-8").splitlines()
    if not pt:
        from tf_transformer.data import load_dataset

        for a, b in load_dataset("sample", "train").as_numpy_iterator():
            pt.append(a.decode())
            en.append(b.decode())
    return [s.split() for s in pt], [s.split() for s in en]


def zipf_words(sentences: list[list[str]], suffixes: tuple[str, ...]) -> list[str]:
    """The side's words by frequency, then made-up ones (real word + suffix) up to MADE_UP."""
    counts: dict[str, int] = {}
    for words in sentences:
        for w in words:
            if w.isalpha():
                counts[w] = counts.get(w, 0) + 1
    real = sorted(counts, key=counts.get, reverse=True)
    made = [w + s for s in suffixes for w in real if len(w) > 3]
    return (real + made)[:MADE_UP]


def write_corpus(folder: Path, pairs: int, seed: int = 0) -> None:
    """Writes `folder/train.{pt,en}` (`pairs` lines) and `dev.{pt,en}`, in chunks."""
    import numpy as np

    pt, en = base_pairs()
    words = {"pt": zipf_words(pt, SUFFIXES), "en": zipf_words(en, SUFFIXES_EN)}
    sentences = {"pt": pt, "en": en}
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, total in (("dev", DEV_PAIRS), ("train", pairs)):
        with (
            open(folder / f"{split}.pt", "w", encoding="utf-8") as pt_file,
            open(folder / f"{split}.en", "w", encoding="utf-8") as en_file,
        ):
            files = {"pt": pt_file, "en": en_file}
            for start in range(0, total, CHUNK):
                n = min(CHUNK, total - start)
                rows = rng.integers(0, len(pt), n)
                for lang, out in files.items():
                    vocab, lines = words[lang], sentences[lang]
                    # Zipf ranks (a = 1.2), folded into the word list.
                    picks = (rng.zipf(1.2, n) - 1) % len(vocab)
                    where = rng.random(n)
                    text = []
                    for row, pick, at in zip(rows.tolist(), picks.tolist(), where.tolist()):
                        line = list(lines[row]) or ["."]
                        line[int(at * len(line))] = vocab[pick]
                        text.append(" ".join(line))
                    out.write("\n".join(text) + "\n")


# --- The measured processes -------------------------------------------------------------------


def peak_rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def child_vocab(corpus: Path, run_dir: Path) -> dict:
    from tf_transformer.config import DataConfig, get_train_preset
    from tf_transformer.data.mix import Mix
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import prepare_tokenizers

    data = DataConfig(dataset=(str(corpus),))
    train_config = get_train_preset(PRESET)
    start = time.perf_counter()
    mix = Mix.load(data)
    check = time.perf_counter() - start
    start = time.perf_counter()
    tokenizers = prepare_tokenizers(RunDir(run_dir), mix, data, train_config)
    vocab = time.perf_counter() - start
    return {
        "pairs": mix.sizes[0],
        "check_s": check,
        "vocab_s": vocab,
        "vocab_sample": train_config.vocab_sample,
        "vocab_sizes": [
            int(tokenizers.source.get_vocab_size()),
            int(tokenizers.target.get_vocab_size()),
        ],
        "rss_gb": peak_rss_gb(),
    }


def child_train(corpus: Path, run_dir: Path, spawned: float) -> dict:
    from tf_transformer import training
    from tf_transformer.config import DataConfig, get_preset, get_train_preset

    train_config = get_train_preset(PRESET).replace(epochs=None, max_steps=STEPS)
    model_config = get_preset(PRESET)
    model_config = model_config.replace(
        max_length=max(model_config.max_length, train_config.max_tokens)
    )
    ends, tokens = [], []

    def on_step(step: int, metrics: dict) -> None:
        ends.append(time.time())
        tokens.append(float(metrics["tokens"]))

    training.run(
        run_dir,
        DataConfig(dataset=(str(corpus),)),
        model_config,
        train_config,
        progress=False,
        on_step=on_step,
    )
    return {
        "first_step_s": ends[0] - spawned,
        "steps": len(ends),
        "tokens_per_s": sum(tokens[1:]) / (ends[-1] - ends[0]),
        "rss_gb": peak_rss_gb(),
    }


def measure(phase: str, corpus: Path, run_dir: Path) -> dict:
    """Runs `phase` in a fresh process; its figures (the child's last stdout line, JSON)."""
    command = [sys.executable, __file__, "--child", phase, str(corpus), str(run_dir)]
    command.append(repr(time.time()))
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{phase} on {corpus} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- Report -----------------------------------------------------------------------------------


def label(size: float) -> str:
    return f"{size:g}m"


def last_line(results: dict[float, dict]) -> str:
    sizes = list(results)
    fields = []
    for figure, fmt in (
        ("rss_gb", ".2f"),
        ("vocab_s", ".1f"),
        ("first_step_s", ".1f"),
        ("tokens_per_s", ".0f"),
    ):
        fields += [
            f"{figure}_{label(s)}={results[s][figure]:{fmt}}"
            for s in sizes
            if results[s][figure] is not None
        ]
    growth = results[sizes[-1]]["rss_gb"] - results[sizes[0]]["rss_gb"]
    fields.insert(len(sizes), f"rss_growth_gb={growth:.2f}")
    return "data_scale: " + " ".join(fields)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        phase, corpus, run_dir, spawned = sys.argv[2:6]
        if phase == "vocab":
            figures = child_vocab(Path(corpus), Path(run_dir))
        else:
            figures = child_train(Path(corpus), Path(run_dir), float(spawned))
        print(json.dumps(figures))
        return

    sys.path.insert(0, str(REPO / "bench"))
    from json_figures import add_json_flags, write_json

    from tf_transformer.hardware.cpu import describe_cpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=float,
        nargs="+",
        default=[0.1, 1, 4, 10],
        metavar="MILLIONS",
        help="Corpus sizes in millions of pairs (default: 0.1 1 4 10).",
    )
    parser.add_argument(
        "--reuse-tokenizers",
        action="store_true",
        help="Learn the tokenizers at the first size only; the others reuse them (no vocab_s).",
    )
    parser.add_argument("--tmp", default=None, help="Where to write the corpora (default: TMPDIR).")
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)
    learnt = "at the first size" if args.reuse_tokenizers else "per size"
    print(
        f"preset {PRESET}; {STEPS} steps; tokenizers learnt {learnt} (vocab sample 1,000,000), "
        "then reused by the training processes",
        flush=True,
    )
    started = time.perf_counter()
    results: dict[float, dict] = {}
    if args.tmp:
        Path(args.tmp).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="data_scale_", dir=args.tmp) as tmp:
        for size in args.sizes:
            pairs = round(size * 1_000_000)
            corpus, run_dir = Path(tmp) / f"corpus_{label(size)}", Path(tmp) / f"run_{label(size)}"
            start = time.perf_counter()
            write_corpus(corpus, pairs)
            generated = time.perf_counter() - start
            text_gb = sum(f.stat().st_size for f in corpus.glob("train.*")) / 1e9
            learnt = Path(tmp) / "tokenizers"
            if args.reuse_tokenizers and learnt.is_dir():
                shutil.copytree(learnt, run_dir / "tokenizers")
                vocab = {"check_s": None, "vocab_s": None, "vocab_sizes": None, "rss_gb": None}
            else:
                vocab = measure("vocab", corpus, run_dir)
                shutil.copytree(run_dir / "tokenizers", learnt, dirs_exist_ok=True)
            train = measure("train", corpus, run_dir)
            results[size] = {
                "pairs": pairs,
                "text_gb": text_gb,
                "generate_s": generated,
                "check_s": vocab["check_s"],
                "vocab_s": vocab["vocab_s"],
                "vocab_sizes": vocab["vocab_sizes"],
                "rss_gb_vocab": vocab["rss_gb"],
                "rss_gb_train": train["rss_gb"],
                "rss_gb": max(vocab["rss_gb"] or 0.0, train["rss_gb"]),
                "first_step_s": train["first_step_s"],
                "tokens_per_s": train["tokens_per_s"],
            }
            r = results[size]
            learning = "tokenizers reused"
            if r["vocab_s"] is not None:
                learning = (
                    f"{r['rss_gb_vocab']:.2f} GB (vocab); check {r['check_s']:.1f} s; tokenizers {r['vocab_s']:.1f} s "
                    f"(vocabularies {r['vocab_sizes'][0]:,}/{r['vocab_sizes'][1]:,})"
                )
            print(
                f"{pairs:>10,} pairs ({text_gb:.2f} GB, written in {generated:.0f} s): "
                f"peak RSS {r['rss_gb_train']:.2f} GB (train), {learning}; first step {r['first_step_s']:.1f} s; "
                f"{r['tokens_per_s']:.0f} tokens/s",
                flush=True,
            )
            shutil.rmtree(corpus)
            shutil.rmtree(run_dir)
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    write_json(
        args,
        "data_scale",
        {"preset": PRESET, "steps": STEPS, "sizes": {label(s): r for s, r in results.items()}},
    )
    print(last_line(results))


if __name__ == "__main__":
    main()
