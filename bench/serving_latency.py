"""Latency of the exported SavedModel (what TF Serving would run), graph export against XLA export.

Exports one model twice, as `tf-transformer export` does without and with `--jit-compile` (the
tutorial preset with random weights and ~8000-token vocabularies, or a trained run directory with
--run-dir), loads both with `tf.saved_model.load`, replays each export's TF Serving warm-up file
(`assets.extra/tf_serving_warmup_requests`, as the server does at load: the XLA export compiles
there) and times the signatures: one ~20-token sentence and a batch of 32, greedy (`greedy`) and
beam search (`serving_default`, beam 4). Graph and XLA calls alternate (A B A B), so both see the
same machine load. Random weights never emit END, so every decode runs exactly --max-length
steps: the default (24) stands for a ~20-token translation.

    .venv/bin/python bench/serving_latency.py [--run-dir runs/NAME] [--repeats 30] [--json PATH]

`--save-exports DIR` keeps the two exports in DIR (graph/, xla/); `--against DIR` also loads
the exports another checkout kept there (the same preset and flags) and times them in the same
process, interleaved with ours (A B A B), printing a line `against: graph_greedy=... ...`: the
median over pairs of their time over ours (above 1 = ours faster).

The last line is machine-readable (one sentence, p50):
    latency: graph_greedy_p50_ms=... xla_greedy_p50_ms=... graph_beam4_p50_ms=... xla_beam4_p50_ms=...
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tf_transformer.hardware.cpu import describe_cpu

SENTENCE = (
    "o meu irmão mais novo comprou um carro vermelho ontem , mas ainda não sabe conduzir "
    "na cidade ."
)


def synthetic_tokenizers(vocab_size: int, directory: Path):
    """Tokenizers over `vocab_size`-token vocabularies: the sample corpus' words, then filler."""
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.text.tokenizers import RESERVED_TOKENS, Tokenizers, write_vocab

    pairs = sample_pairs("train", size=5000) + [(SENTENCE, "")]
    paths = []
    for index, lang in enumerate(("pt", "en")):
        words = sorted({w for pair in pairs for w in pair[index].lower().split()})
        vocab = list(RESERVED_TOKENS) + [w for w in words if w not in RESERVED_TOKENS]
        vocab = vocab[:vocab_size]
        vocab += [f"##f{i}" for i in range(vocab_size - len(vocab))]
        paths.append(write_vocab(vocab, directory / f"{lang}_vocab.txt"))
    return Tokenizers(*paths)


def replay_warmup(path: Path, loaded) -> tuple[int, float]:
    """Runs every warm-up request of the version at `path`; returns (requests, seconds)."""
    from tf_transformer.backends.savedmodel.warmup import read_warmup_requests

    requests = read_warmup_requests(path)
    start = time.perf_counter()
    for request in requests:
        inputs = {name: tf.constant(value) for name, value in request.inputs.items()}
        loaded.signatures[request.signature_name](**inputs)
    return len(requests), time.perf_counter() - start


def timed(fn, sentences) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn(sentences=sentences)
    tokens = out["tokens"].numpy()
    return time.perf_counter() - start, tokens


def percentile_ms(times: list[float], q: float) -> float:
    return float(np.percentile(np.array(times) * 1000.0, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=None, help="A trained run (default: random weights).")
    parser.add_argument("--preset", default="tutorial", help="Model preset without --run-dir.")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-length", type=int, default=24, help="Most generated tokens.")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument(
        "--repeats", type=int, default=30, help="Timed calls per one-sentence case."
    )
    parser.add_argument("--batch-repeats", type=int, default=5, help="Timed calls per batch case.")
    parser.add_argument("--batch", type=int, default=32, help="The batch case's size (0: skip).")
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: auto).")
    parser.add_argument("--save-exports", default=None, help="Keep the exports in this folder.")
    parser.add_argument(
        "--against", default=None, help="Another checkout's --save-exports folder, timed too."
    )
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    from tf_transformer.backends.savedmodel.export import ExportModule
    from tf_transformer.config import DecodeConfig, get_preset
    from tf_transformer.model import Transformer
    from tf_transformer.run_dir import RunDir

    work = Path(args.save_exports or tempfile.mkdtemp(prefix="serving_latency_"))
    if args.run_dir:
        run = RunDir(args.run_dir)
        tokenizers, model = run.load_tokenizers(), run.load_model()
        source = f"run {args.run_dir}"
    else:
        tokenizers = synthetic_tokenizers(args.vocab_size, work)
        config = get_preset(args.preset).replace(
            input_vocab_size=args.vocab_size, target_vocab_size=args.vocab_size
        )
        tf.keras.utils.set_random_seed(0)
        model = Transformer.from_config(config)
        model.build()
        source = f"preset {args.preset}, random weights, vocab {args.vocab_size}"
    source_tokens = int(tokenizers.source.tokenize(tf.constant([SENTENCE])).row_lengths()[0])
    print(f"model: {source}; sentence: {source_tokens} source tokens, {args.max_length} generated")

    batch_sizes = tuple(sorted({1, args.batch} - {0}))
    loaded = {}
    for kind, jit in (("graph", False), ("xla", True)):
        start = time.perf_counter()
        module = ExportModule(
            tokenizers,
            model,
            config=DecodeConfig(
                max_source_tokens=args.max_length,
                max_new_tokens=args.max_length,
                beam_size=args.beam_size,
            ),
            jit_compile=jit,
            warmup_batch_sizes=batch_sizes,
        )
        path = module.export(work / kind)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        loaded[kind] = tf.saved_model.load(str(path))
        load_s = time.perf_counter() - start
        requests, warmup_s = replay_warmup(path, loaded[kind])
        print(
            f"{kind:>5} export: {export_s:5.1f} s to {path}; load {load_s:4.1f} s; warm-up "
            f"{requests} requests, {warmup_s:5.1f} s"
        )
    if args.against:
        for kind in ("graph", "xla"):
            (path,) = sorted(Path(args.against, kind).iterdir())  # its one version folder
            loaded[f"against_{kind}"] = tf.saved_model.load(str(path))
            replay_warmup(path, loaded[f"against_{kind}"])

    figures, against = {}, {}
    cases = [("greedy", "greedy", 1), (f"beam{args.beam_size}", "serving_default", 1)]
    if args.batch:
        cases += [
            (f"greedy_b{args.batch}", "greedy", args.batch),
            (f"beam{args.beam_size}_b{args.batch}", "serving_default", args.batch),
        ]
    for name, signature, batch in cases:
        sentences = tf.constant([SENTENCE] * batch)
        functions = {kind: loaded[kind].signatures[signature] for kind in loaded}
        times = {kind: [] for kind in loaded}
        tokens = {}
        for kind, fn in functions.items():  # one untimed call each (warm-up ran this shape)
            _, tokens[kind] = timed(fn, sentences)
        for _ in range(args.repeats if batch == 1 else args.batch_repeats):
            for kind, fn in functions.items():
                seconds, _ = timed(fn, sentences)
                times[kind].append(seconds)
        same = np.array_equal(tokens["graph"], tokens["xla"])
        line = []
        for kind in ("graph", "xla"):
            p50, p95 = percentile_ms(times[kind], 50), percentile_ms(times[kind], 95)
            figures[f"{kind}_{name}_p50_ms"] = p50
            figures[f"{kind}_{name}_p95_ms"] = p95
            line.append(f"{kind} p50 {p50:7.1f} ms p95 {p95:7.1f} ms")
        generated = tokens["graph"].shape[1] - 1
        print(
            f"{name:>11}: {'  |  '.join(line)}  ({len(times['graph'])} calls each, "
            f"{generated} tokens, same ids: {'yes' if same else 'NO'})"
        )
        for kind in ("graph", "xla") if args.against else ():
            theirs, ours = times[f"against_{kind}"], times[kind]
            against[f"{kind}_{name}"] = float(np.median(np.array(theirs) / np.array(ours)))
    beam = f"beam{args.beam_size}"
    keys = ["graph_greedy", "xla_greedy", f"graph_{beam}", f"xla_{beam}"]
    if args.against:
        print("against: " + " ".join(f"{k}={against[k]:.3f}" for k in keys))
    print("latency: " + " ".join(f"{k}_p50_ms={figures[f'{k}_p50_ms']:.1f}" for k in keys))
    generated = {"source_tokens": source_tokens, "generated_tokens": args.max_length}
    write_json(args, "serving_latency", dict(figures, model=source, batch=args.batch, **generated))


if __name__ == "__main__":
    main()
