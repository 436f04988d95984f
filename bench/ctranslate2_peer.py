"""Our decoders against CTranslate2 on the same weights, in one process.

Run from the repository root (needs ``pip install ctranslate2``)::

    .venv/bin/python bench/ctranslate2_peer.py [--repeats 5] [--sentences 3] [--lengths 40 128]
        [--json PATH]

The tutorial preset with random weights (vocabularies of 7765/7010 synthetic wordpieces) is
exported twice: as our SavedModel (`ExportModule`, what TF Serving runs; graph mode) and as a
CTranslate2 model (`export_ctranslate2`, float32 weights, loaded as float32 and as int8, one
thread: ``intra_threads=1``). Each engine decodes the same 22-token sources at batch 1, greedy
and beam 4, N tokens: our XLA decoder and CTranslate2 are forced to exactly N (END banned before
N: ``min_length`` / ``min_decoding_length``); the SavedModel cannot be forced, so the sources are
drawn such that it does not emit END before N (checked). Calls rotate over the engines
(A B C D A B C D ...), so all see the same machine load; figures are medians of per-round
ratios. A ratio above 1 means ours is faster. The last line is machine-readable (greedy, N = the
first length, batch 1)::

    ct2: xla_vs_ct2_fp32=... savedmodel_vs_ct2_fp32=... xla_vs_ct2_int8=...
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tf_transformer.backends.ctranslate2.export import export_ctranslate2
from tf_transformer.backends.litert.layout import LiteRTLayout
from tf_transformer.backends.savedmodel.export import ExportModule
from tf_transformer.config import DecodeConfig, get_preset
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.model import Transformer
from tf_transformer.text.special_tokens import RESERVED_TOKENS
from tf_transformer.text.tokenizers import Tokenizers, write_vocab

ENGINES = ("xla", "savedmodel", "ct2_fp32", "ct2_int8")


def tokenizers_for(config, directory: Path) -> Tokenizers:
    """Real WordPiece tokenizers over synthetic vocabularies `s4 s5 ...` / `t4 t5 ...`."""
    paths = []
    for prefix, size in (("s", config.input_vocab_size), ("t", config.target_vocab_size)):
        vocab = list(RESERVED_TOKENS) + [f"{prefix}{i}" for i in range(len(RESERVED_TOKENS), size)]
        paths.append(write_vocab(vocab, directory / f"{prefix}_vocab.txt"))
    return Tokenizers(*paths)


def peers(config, prefix: str):
    """`(model, tokenizers, work folder, {"float32"|"int8": ctranslate2.Translator})`: the random
    model of `config` (seed 0), its tokenizers and its CTranslate2 export at both precisions,
    one thread each."""
    import ctranslate2

    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_config(config)
    model.build()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    tokenizers = tokenizers_for(config, work)
    ct2_dir = export_ctranslate2((model, tokenizers), work / "ct2")
    ct2 = {
        compute: ctranslate2.Translator(
            str(ct2_dir), device="cpu", compute_type=compute, intra_threads=1, inter_threads=1
        )
        for compute in ("float32", "int8")
    }
    return model, tokenizers, work, ct2


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def engines_for(model, tokenizers, n: int, beam: int, saved, ct2, step_layout=None):
    """`{engine: (call(source_index) -> tokens generated)}` for one (length, beam) case."""
    xla = make_decode_fn(
        model,
        max_new_tokens=n,
        min_length=n,
        beam_size=beam,
        jit_compile=True,
        step_layout=step_layout,
    )
    signature = saved.signatures["greedy" if beam == 1 else "serving_default"]
    options = {
        "beam_size": beam,
        "min_decoding_length": n,
        "max_decoding_length": n,
        "suppress_sequences": [["[PAD]"]],
    }

    def run_xla(source):
        return int(xla(source["ids"]).lengths.numpy()[0])

    def run_saved(source):
        tokens = signature(sentences=source["text"])["tokens"].numpy()[0]
        return int(np.count_nonzero(tokens[1:]))

    def run_ct2(translator):
        def run(source):
            result = translator.translate_batch([source["pieces"]], **options)
            return len(result[0].hypotheses[0])

        return run

    return {
        "xla": run_xla,
        "savedmodel": run_saved,
        "ct2_fp32": run_ct2(ct2["float32"]),
        "ct2_int8": run_ct2(ct2["int8"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[40, 128])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--step-layout",
        choices=("litert", "xla"),
        default=None,
        help="our XLA decoder's one-token step (make_decode_fn's step_layout; default xla).",
    )
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    started = time.perf_counter()
    import ctranslate2

    config = get_preset("tutorial")
    model, tokenizers, work, ct2 = peers(config, "ct2_peer_")
    print(
        f"tutorial preset, random weights, batch 1; ctranslate2 {ctranslate2.__version__} "
        f"(1 thread); TensorFlow {tf.__version__} (default threads)"
    )

    rng = np.random.default_rng(0)
    results = {}
    cases = []  # the --json figures: median ms per engine and the ratios, per (length, beam)
    for n in args.lengths:
        saved_path = ExportModule(
            tokenizers,
            model,
            config=DecodeConfig(max_source_tokens=n, max_new_tokens=n, beam_size=4),
        ).export(work / f"saved_{n}")
        saved = tf.saved_model.load(str(saved_path))
        # Sources after which neither greedy nor beam 4 emits END before n tokens (unforced),
        # so the SavedModel generates as many tokens as the forced engines.
        unforced = [make_decode_fn(model, max_new_tokens=n, beam_size=b) for b in args.beams]
        sources = []
        while len(sources) < args.sentences:
            body = rng.integers(len(RESERVED_TOKENS), config.input_vocab_size, size=20)
            ids = tf.constant([[2, *body, 3]], tf.int64)
            if all(int(fn(ids).lengths[0]) == n for fn in unforced):
                sources.append(
                    {
                        "ids": ids,
                        "text": tf.constant([" ".join(f"s{i}" for i in body)]),
                        "pieces": [f"s{i}" for i in body],
                    }
                )
        for beam in args.beams:
            layout = {"litert": LiteRTLayout}.get(args.step_layout, args.step_layout)
            engines = engines_for(model, tokenizers, n, beam, saved, ct2, layout)
            for name, run in engines.items():  # trace, compile, warm up
                generated = {run(source) for source in sources}
                assert generated == {n}, (name, n, beam, generated)
            times = {name: [] for name in ENGINES}
            for _ in range(args.repeats):
                for source in sources:
                    for name in ENGINES:
                        times[name].append(seconds(lambda r=engines[name], s=source: r(s)))
            ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
            ratios = {
                f"{ours}_vs_{theirs}": statistics.median(
                    b / a for a, b in zip(times[ours], times[theirs], strict=True)
                )
                for ours in ("xla", "savedmodel")
                for theirs in ("ct2_fp32", "ct2_int8")
            }
            results[(n, beam)] = ratios
            cases.append({"tokens": n, "beam": beam, "ms": ms, "ratios": ratios})
            print(
                f"{'greedy' if beam == 1 else f'beam {beam}':7s} {n:4d} tokens: "
                + ", ".join(f"{name} {ms[name]:7.1f} ms" for name in ENGINES)
                + " | "
                + " ".join(f"{k}={v:.2f}" for k, v in ratios.items())
            )
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    first = results[(args.lengths[0], args.beams[0])]
    print(
        f"ct2: xla_vs_ct2_fp32={first['xla_vs_ct2_fp32']:.2f} "
        f"savedmodel_vs_ct2_fp32={first['savedmodel_vs_ct2_fp32']:.2f} "
        f"xla_vs_ct2_int8={first['xla_vs_ct2_int8']:.2f}"
    )
    figures = {"cases": cases, "batch": 1, "preset": "tutorial"}
    write_json(args, "ctranslate2_peer", dict(figures, ctranslate2=ctranslate2.__version__))


if __name__ == "__main__":
    main()
