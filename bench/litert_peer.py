"""Our LiteRT export against CTranslate2 and our XLA decoder on the same weights, in one process.

Run from the repository root (needs ``pip install ctranslate2 ai-edge-litert``)::

    .venv/bin/python bench/litert_peer.py [--repeats 5] [--sentences 3] [--lengths 40 128]
        [--json PATH]

The tutorial preset with random weights (synthetic vocabularies, as bench/ctranslate2_peer.py)
is exported as LiteRT float32 and int8 (`export_litert`, a 128-position cache; the runtime holds
N positions, its `max_new_tokens`, as our XLA decoder and CTranslate2 are told N) and as
a CTranslate2 model (float32 weights, loaded as float32 and int8). Every engine runs one thread
(LiteRT ``num_threads=1``, CTranslate2 ``intra_threads=1``; our XLA decoder TensorFlow's default
threads, as in bench/ctranslate2_peer.py) and decodes the same 22-token source ids at batch 1,
forced to exactly N tokens (END banned before N). Calls rotate over the engines, so all see the
same machine load; figures are medians of per-round ratios (above 1: LiteRT is faster), except
``beam4_vs_greedy``, LiteRT float32 beam 4 time over its greedy time (lower is better). The
last line is machine-readable (N = the first length)::

    litert: fp32_vs_ct2_fp32=... int8_vs_ct2_int8=... int8_vs_xla=... beam4_vs_greedy=...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np
import tensorflow as tf
from ctranslate2_peer import peers, seconds
from json_figures import add_json_flags, write_json

from tf_transformer.backends.litert.export import METADATA_FILE, export_litert
from tf_transformer.backends.litert.runtime import LiteRTTranslator
from tf_transformer.config import DecodeConfig, get_preset
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.text.special_tokens import RESERVED_TOKENS

ENGINES = ("litert_fp32", "litert_int8", "litert_fp32_beam4", "ct2_fp32", "ct2_int8", "xla")


def engines_for(model, n: int, litert: dict, ct2: dict) -> dict:
    """`{engine: call(source) -> tokens generated}` for N tokens, greedy (one LiteRT beam 4)."""
    xla = make_decode_fn(model, max_new_tokens=n, min_length=n, jit_compile=True)

    def run_litert(translator, beam):
        def run(source):
            ids = translator.decode(source["ids"], beam, min_length=n)
            return int(np.count_nonzero(ids[0, 1:]))

        return run

    def run_ct2(translator):
        options = {
            "beam_size": 1,
            "min_decoding_length": n,
            "max_decoding_length": n,
            "suppress_sequences": [["[PAD]"]],
        }

        def run(source):
            return len(translator.translate_batch([source["pieces"]], **options)[0].hypotheses[0])

        return run

    return {
        "litert_fp32": run_litert(litert["none"], 1),
        "litert_int8": run_litert(litert["int8"], 1),
        "litert_fp32_beam4": run_litert(litert["beam"], 4),
        "ct2_fp32": run_ct2(ct2["float32"]),
        "ct2_int8": run_ct2(ct2["int8"]),
        "xla": lambda source: int(xla(tf.constant(source["ids"], tf.int64)).lengths.numpy()[0]),
    }


def cache_length(folder: Path) -> int:
    return json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))["cache_length"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[40, 128])
    parser.add_argument("--preset", default="tutorial", help="model preset (random weights)")
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    started = time.perf_counter()
    import ctranslate2

    config = get_preset(args.preset).replace(input_vocab_size=7765, target_vocab_size=7010)
    model, tokenizers, work, ct2 = peers(config, "litert_peer_")
    folders = {
        q: export_litert(tokenizers, model, work / q, quantization=q) for q in ("none", "int8")
    }
    print(
        f"{args.preset} preset, random weights, batch 1; LiteRT (1 thread) caches of N "
        f"positions (the export's {cache_length(folders['none'])}); ctranslate2 "
        f"{ctranslate2.__version__} (1 thread); TensorFlow {tf.__version__} XLA (default threads)"
    )
    rng = np.random.default_rng(0)
    sources = []
    for _ in range(args.sentences):
        body = rng.integers(len(RESERVED_TOKENS), config.input_vocab_size, size=20)
        sources.append(
            {"ids": np.array([[2, *body, 3]], np.int32), "pieces": [f"s{i}" for i in body]}
        )
    results, cases = {}, []
    for n in args.lengths:
        decoding = DecodeConfig(max_new_tokens=n)
        litert = {q: LiteRTTranslator(f, decoding, num_threads=1) for q, f in folders.items()}
        # Its own interpreters, as a server would have: a batch of 4 rows resizes the step's inputs.
        litert["beam"] = LiteRTTranslator(folders["none"], decoding, num_threads=1)
        engines = engines_for(model, n, litert, ct2)
        for name, run in engines.items():  # compile, warm up; every engine makes n tokens
            generated = {run(source) for source in sources}
            assert generated == {n}, (name, n, generated)
        times = {name: [] for name in ENGINES}
        for _ in range(args.repeats):
            for source in sources:
                for name in ENGINES:
                    times[name].append(seconds(lambda r=engines[name], s=source: r(s)))

        def ratio(slow, fast, times=times):
            return statistics.median(b / a for a, b in zip(times[fast], times[slow], strict=True))

        ratios = {
            "fp32_vs_ct2_fp32": ratio("ct2_fp32", "litert_fp32"),
            "int8_vs_ct2_int8": ratio("ct2_int8", "litert_int8"),
            "int8_vs_xla": ratio("xla", "litert_int8"),
            "beam4_vs_greedy": ratio("litert_fp32_beam4", "litert_fp32"),
        }
        ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
        results[n] = ratios
        cases.append({"tokens": n, "beam": 1, "ms": ms, "ratios": ratios})
        print(
            f"{n:4d} tokens: "
            + ", ".join(f"{name} {ms[name]:7.1f} ms" for name in ENGINES)
            + " | "
            + " ".join(f"{k}={v:.2f}" for k, v in ratios.items())
        )
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    first = results[args.lengths[0]]
    print("litert: " + " ".join(f"{k}={v:.2f}" for k, v in first.items()))
    figures = {"cases": cases, "batch": 1, "preset": args.preset}
    write_json(args, "litert_peer", dict(figures, ctranslate2=ctranslate2.__version__))


if __name__ == "__main__":
    main()
