"""`tf-transformer serve` under load: throughput and latency by client count, answers against
the serial ones, and the server's memory over many requests.

Serves a model with `tf-transformer serve` in a process of its own (default: the demo run,
`make demo`, exported to LiteRT int8 in a temporary folder first; --model PATH serves PATH as
it is), then, on the loopback address:

1. the serial answers: each sentence of the sample corpus's test split (written style) sent
   alone, one client;
2. for each client count (--clients, default 1 4 16), every client thread sending its share of
   --requests requests, one sentence each, as `POST /translate` JSON (LibreTranslate's);
   throughput (requests a second), p50 and p99 latency, errors, and answers that differ from
   the serial ones;
3. the server's resident memory (VmRSS) after the first 100 requests of a long run and after
   --memory-requests (default 10,000) with the largest client count.

The demo's tiny model decodes a sentence in about a millisecond, so HTTP dominates its
figures; `--random-preset tutorial` serves the tutorial preset (random weights, the demo's
tokenizers, every sentence --max-new-tokens long) to show what batching does for a model
whose decoding dominates. The client threads run on the same cores as the server.

    flock /tmp/tf_bench.lock .venv/bin/python bench/serve_load.py [--model runs/demo]

The last line, exactly:
    serve: rps_1=... rps_16=... speedup_16=... p50_ms_16=... p99_ms_16=... errors=0 mismatches=0 rss_growth=...
(`speedup_N`: clients' throughput over one client's; `rss_growth`: memory after the long run
over memory after 100 requests). --json PATH also writes the figures. Exits 1 on any error or
mismatch.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from json_figures import add_json_flags, write_json

from tf_transformer.data.sample.pairs import sample_pairs
from tf_transformer.hardware.cpu import describe_cpu


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ask(url: str, text: str) -> tuple[float, int, str]:
    """`(seconds, status, translation or error)` of one `/translate` request."""
    body = json.dumps({"q": text, "source": "pt", "target": "en"}).encode()
    request = urllib.request.Request(
        f"{url}/translate", data=body, headers={"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())["translatedText"]
            status = response.status
    except urllib.error.HTTPError as error:
        status, answer = error.code, error.read().decode()
    except OSError as error:  # refused, reset: the server is down
        status, answer = 0, str(error)
    return time.perf_counter() - start, status, answer


def load(url: str, texts: list[str], clients: int, expected: dict[str, str]) -> dict:
    """Every text sent once, by `clients` threads."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda text: ask(url, text), texts))
    wall = time.perf_counter() - start
    times_ms = np.array([seconds for seconds, _, _ in results]) * 1000
    errors = sum(status != 200 for _, status, _ in results)
    mismatches = sum(
        status == 200 and answer != expected[text]
        for text, (_, status, answer) in zip(texts, results)
    )
    return {
        "clients": clients,
        "requests": len(texts),
        "rps": round(len(texts) / wall, 1),
        "p50_ms": round(float(np.percentile(times_ms, 50)), 1),
        "p99_ms": round(float(np.percentile(times_ms, 99)), 1),
        "errors": int(errors),
        "mismatches": int(mismatches),
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def random_run(source: Path, preset: str, folder: Path) -> Path:
    """A run directory in `folder`: `source`'s tokenizers and a `preset` model of random
    weights (it writes `max_new_tokens` tokens for every sentence: a decoding workload)."""
    import shutil

    import tensorflow as tf

    from tf_transformer.config import get_preset
    from tf_transformer.model import Transformer
    from tf_transformer.run_dir import RunDir
    from tf_transformer.weights import model_checkpoint

    tokenizers = RunDir(source).load_tokenizers()
    run = RunDir(folder / f"random-{preset}")
    shutil.copytree(RunDir(source).tokenizers_path, run.tokenizers_path)
    config = get_preset(preset).replace(
        input_vocab_size=int(tokenizers.source.get_vocab_size()),
        target_vocab_size=int(tokenizers.target.get_vocab_size()),
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_config(config)
    model.build()
    run.write_config({"model": config.to_dict()})
    checkpoint = model_checkpoint(model=model)
    tf.train.CheckpointManager(checkpoint, str(run.checkpoints_path), max_to_keep=1).save()
    return run.root


def prepared_model(path: Path, folder: Path, max_new_tokens: int | None) -> Path:
    """`path` itself, or a run directory's LiteRT int8 export written into `folder`."""
    if not (path / "config.json").is_file():
        return path
    command = [sys.executable, "-m", "tf_transformer.cli", "export", str(path), "--format"]
    command += ["litert", "--quantization", "int8", "--out", str(folder / "litert")]
    if max_new_tokens:
        command += ["--max-new-tokens", str(max_new_tokens)]
    subprocess.run(command, check=True, capture_output=True)
    return folder / "litert"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/demo", help="Run directory or export.")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--requests", type=int, default=400, help="Requests per client count.")
    parser.add_argument("--memory-requests", type=int, default=10_000)
    parser.add_argument(
        "--random-preset",
        default=None,
        metavar="PRESET",
        help="Serve a PRESET model of random weights with --model's tokenizers instead "
        "(exported to LiteRT int8 with --max-new-tokens, every sentence that long).",
    )
    parser.add_argument("--max-new-tokens", type=int, default=32, help="With --random-preset.")
    add_json_flags(parser)
    args = parser.parse_args()
    if not Path(args.model).exists():
        print(f"{args.model} does not exist: run `make demo` first, or pass --model PATH.")
        return 2
    print(describe_cpu())
    texts = list(dict.fromkeys(pt for pt, _ in sample_pairs("test", style="written")))
    texts = texts[: args.requests]
    with tempfile.TemporaryDirectory() as folder:
        model, cap = Path(args.model), None
        if args.random_preset:
            model = random_run(model, args.random_preset, Path(folder))
            cap = args.max_new_tokens
        model = prepared_model(model, Path(folder), cap)
        port = free_port()
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        command = [sys.executable, "-m", "tf_transformer.cli", "serve", str(model)]
        server = subprocess.Popen(
            [*command, "--port", str(port)], env=env, stdout=subprocess.PIPE, text=True
        )
        url = f"http://127.0.0.1:{port}"
        try:
            print(server.stdout.readline().strip())  # "Serving ..."
            deadline = time.monotonic() + 300
            while True:
                try:
                    urllib.request.urlopen(f"{url}/languages", timeout=5).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the server did not start") from None
                    time.sleep(0.2)
            start = time.perf_counter()
            expected = {text: ask(url, text)[2] for text in texts}
            print(f"serial answers: {len(texts)} in {time.perf_counter() - start:.1f} s")
            figures = {}
            for clients in args.clients:
                figures[clients] = result = load(url, texts, clients, expected)
                print(
                    f"  {clients:3d} clients: {result['rps']:7.1f} requests/s  p50 "
                    f"{result['p50_ms']:7.1f} ms  p99 {result['p99_ms']:7.1f} ms  errors "
                    f"{result['errors']}  mismatches {result['mismatches']}"
                )
            most = max(args.clients)
            load(url, texts[:100], most, expected)
            before = rss_mb(server.pid)
            repeats = -(-args.memory_requests // len(texts))
            long = load(url, (texts * repeats)[: args.memory_requests], most, expected)
            after = rss_mb(server.pid)
            print(
                f"memory: {before:.0f} MB after 100 requests, {after:.0f} MB after "
                f"{long['requests']} more ({long['errors']} errors, {long['mismatches']} "
                f"mismatches); the server is {'up' if server.poll() is None else 'DOWN'}"
            )
        finally:
            server.terminate()
            server.wait(30)
    one = figures[min(args.clients)]["rps"]
    top = figures[most]
    errors = sum(f["errors"] for f in figures.values()) + long["errors"]
    mismatches = sum(f["mismatches"] for f in figures.values()) + long["mismatches"]
    summary = {
        f"rps_{min(args.clients)}": one,
        f"rps_{most}": top["rps"],
        f"speedup_{most}": round(top["rps"] / one, 2),
        f"p50_ms_{most}": top["p50_ms"],
        f"p99_ms_{most}": top["p99_ms"],
        "errors": errors,
        "mismatches": mismatches,
        "rss_growth": round(after / before, 3),
    }
    write_json(args, "serve_load", {"by_clients": list(figures.values()), **summary})
    print("serve: " + " ".join(f"{k}={v}" for k, v in summary.items()))
    return 1 if errors or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
