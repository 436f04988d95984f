"""Latency of the exported SavedModel (what TF Serving would run), on the CPU.

Exports a model (the tutorial preset with random weights and ~8000-token vocabularies, or a
trained run directory with --run-dir), loads it with `tf.saved_model.load` and times its
signatures: one ~20-token sentence and a batch of 32, greedy (`greedy`) and beam search
(`serving_default`, beam 4). Random weights never emit END, so every decode runs exactly
--max-length steps: the default (24) stands for a ~20-token translation.

    .venv/bin/python bench/serving_latency.py [--run-dir runs/NAME] [--repeats 30]

The last line is machine-readable:
    latency_ms: greedy1_p50=... greedy1_p95=... beam4_1_p50=... ... beam4_32_p95=...
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import tensorflow as tf

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


def percentiles(times: list[float]) -> tuple[float, float]:
    ms = np.array(times) * 1000.0
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=None, help="A trained run (default: random weights).")
    parser.add_argument("--preset", default="tutorial", help="Model preset without --run-dir.")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-length", type=int, default=24, help="Most generated tokens.")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=30, help="Timed calls per single case.")
    parser.add_argument("--batch-repeats", type=int, default=8, help="Timed calls per batch.")
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: auto).")
    args = parser.parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    from tf_transformer.config import get_preset
    from tf_transformer.inference.export import ExportModule
    from tf_transformer.model import Transformer
    from tf_transformer.run_dir import RunDir

    work = Path(tempfile.mkdtemp(prefix="serving_latency_"))
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
    start = time.perf_counter()
    module = ExportModule(tokenizers, model, max_length=args.max_length, beam_size=args.beam_size)
    path = module.export(work / "model")
    export_s = time.perf_counter() - start
    loaded = tf.saved_model.load(str(path))
    source_tokens = int(tokenizers.source.tokenize(tf.constant([SENTENCE])).row_lengths()[0])
    print(f"model: {source}; export {export_s:.1f} s to {path}")
    print(f"sentence: {source_tokens} source tokens; at most {args.max_length} generated")

    figures = {}
    cases = [
        ("greedy1", "greedy", 1),
        (f"beam{args.beam_size}_1", "serving_default", 1),
        ("greedy32", "greedy", 32),
        (f"beam{args.beam_size}_32", "serving_default", 32),
    ]
    for name, signature, batch in cases:
        fn = loaded.signatures[signature]
        sentences = tf.constant([SENTENCE] * batch)
        for _ in range(3):  # warm-up: first calls optimise the graph
            out = fn(sentences=sentences)
        repeats = args.repeats if batch == 1 else args.batch_repeats
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn(sentences=sentences)
            out["translations"].numpy()
            times.append(time.perf_counter() - start)
        p50, p95 = percentiles(times)
        figures[f"{name}_p50"], figures[f"{name}_p95"] = p50, p95
        generated = int(out["tokens"].shape[1]) - 1
        print(
            f"{name:>10}: p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  mean "
            f"{statistics.mean(times) * 1000:8.1f} ms  ({repeats} calls, {generated} tokens)"
        )
    print("latency_ms: " + " ".join(f"{k}={v:.1f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
