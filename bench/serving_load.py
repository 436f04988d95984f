"""Serving under load: 8 client threads × 200 requests against an exported SavedModel, over REST and gRPC.

Loads the SavedModel (default: the test suite's tiny export, tests/export_helpers.py; or
--saved-model PATH), serves it through the stand-ins for TF Serving's REST and gRPC APIs
(tests/predict_server.py, tests/predict_grpc_server.py) and lets client threads share one
client each, sending a random mix (tests/load_driver.py): batches of 1, 3, 8 and 16
sentences, awkward text (empty, 10,000 characters, emoji) and two invalid requests the server
must refuse (a non-string input, an unknown signature). Every answer is compared with the answer
to the same request sent alone before the load. --server URL sends the same mix to a running
TF Serving instead (the memory is then only this client's).

    flock /tmp/tf_bench.lock .venv/bin/python bench/serving_load.py [--threads 8] [--requests 200]

Prints per protocol the requests, refusals, errors, mismatches and p50/p99 latency (all
requests, the refused ones included), the process memory (RSS) before and after the load, and
last, exactly (errors: failures other than the intended refusals):
    load: requests=... errors=... mismatches=0 p50_ms=... p99_ms=...
--json PATH also writes these figures as JSON. Exits 1 when any error or mismatch was seen.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the stand-ins

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tests.export_helpers import SENTENCES
from tests.load_driver import LoadResult, request_mix, run_load, serial_answers
from tf_transformer.backends.savedmodel.server import serving_client
from tf_transformer.hardware.cpu import describe_cpu


def memory_mb() -> dict[str, float]:
    """This process' resident memory now and at its peak (Linux /proc), in MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB
    return {"rss_mb": round(fields["VmRSS"], 1), "peak_rss_mb": round(fields["VmHWM"], 1)}


def summary(result: LoadResult) -> dict[str, float | int]:
    times_ms = np.array(result.latencies) * 1000.0
    return {
        "requests": result.requests,
        "refused": result.refused,
        "errors": result.errors,
        "mismatches": result.mismatches,
        "p50_ms": round(float(np.percentile(times_ms, 50)), 2),
        "p99_ms": round(float(np.percentile(times_ms, 99)), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8, help="Client threads (default: 8).")
    parser.add_argument(
        "--requests", type=int, default=200, help="Requests per thread (default: 200)."
    )
    parser.add_argument(
        "--protocol", choices=("rest", "grpc", "both"), default="both", help="Default: both."
    )
    parser.add_argument(
        "--saved-model", default=None, help="A SavedModel version directory (default: tiny)."
    )
    parser.add_argument(
        "--server",
        action="append",
        default=None,
        metavar="URL",
        help="A running TF Serving (http://host:8501 or grpc://host:8500; repeatable) instead "
        "of the stand-ins.",
    )
    parser.add_argument("--model-name", default="transformer", help="With --server.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the request draws.")
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on

    cases = request_mix(SENTENCES)
    results: dict[str, dict] = {}
    total = LoadResult()
    with ExitStack() as stack:
        if args.server:
            urls, model_name, what = args.server, args.model_name, "TF Serving"
        else:
            import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

            from tests.export_helpers import tiny_export
            from tests.predict_grpc_server import GrpcPredictServer
            from tests.predict_server import PredictServer

            path = Path(args.saved_model) if args.saved_model else tiny_export()[0]
            loaded = tf.saved_model.load(str(path))
            model_name, what = "transformer", f"stand-ins serving {path}"
            classes = {"rest": PredictServer, "grpc": GrpcPredictServer}
            protocols = list(classes) if args.protocol == "both" else [args.protocol]
            urls = [stack.enter_context(classes[p](loaded, model_name)).url for p in protocols]
        print(f"{what}: {args.threads} threads x {args.requests} requests per URL", flush=True)
        for url in urls:
            protocol = "grpc" if url.startswith("grpc://") else "rest"
            with serving_client(url, model_name, batch_size=64, timeout=300) as client:
                expected = serial_answers(client, cases)  # also warms the model up
                before = memory_mb()
                result = run_load(
                    client,
                    cases,
                    expected,
                    threads=args.threads,
                    requests_per_thread=args.requests,
                    seed=args.seed,
                )
                after = memory_mb()
            total.add(result)
            figures = summary(result)
            results[protocol] = {**figures, "memory_before": before, "memory_after": after}
            print(
                f"{protocol}: " + " ".join(f"{k}={v}" for k, v in figures.items()),
                f"rss_before_mb={before['rss_mb']} rss_after_mb={after['rss_mb']} "
                f"peak_rss_mb={after['peak_rss_mb']}",
                flush=True,
            )
            for problem in result.problems:
                print(f"  {problem}", flush=True)
    figures = summary(total)
    write_json(
        args,
        "serving_load",
        {
            "served": what,
            "threads": args.threads,
            "requests_per_thread": args.requests,
            "protocols": results,
            "total": figures,
        },
    )
    print(
        f"load: requests={figures['requests']} errors={figures['errors']} "
        f"mismatches={figures['mismatches']} p50_ms={figures['p50_ms']} "
        f"p99_ms={figures['p99_ms']}"
    )
    return 1 if figures["errors"] or figures["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
