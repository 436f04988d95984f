"""Serving under load: client threads send a mix of requests, and every answer is checked.

Shared by tests/backends/savedmodel/test_serving_load.py (a few requests per thread) and bench/serving_load.py
(200 per thread, latency and memory). The mix holds batches of several sizes, awkward but
valid text (empty, 10,000 characters, emoji), and requests the server must refuse (HTTP 400,
gRPC INVALID_ARGUMENT): a non-string input and an unknown signature. Each valid request's
answer must equal the answer the same client got for it alone, before the load.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import tensorflow as tf

from tf_transformer.backends.savedmodel.client import BatchingClient, ServingError
from tf_transformer.backends.savedmodel.grpc_client import GrpcServingClient, make_predict_request
from tf_transformer.backends.savedmodel.rest_client import make_request

AWKWARD = ["", "a" * 10_000, "eu 😀 gosto de café ☕ 🇧🇷 .", "   "]


@dataclass(frozen=True)
class Case:
    """One request of the mix: a batch of sentences, or (invalid) one the server refuses."""

    name: str
    sentences: tuple[str, ...] = ()
    invalid: str | None = None  # "dtype" (a non-string input) or "signature" (unknown)

    def requests(self, batch_size: int) -> int:
        """The requests that sending it takes: the client's batches, or the one refused."""
        return 1 if self.invalid else -(-len(self.sentences) // batch_size)


def request_mix(sentences: list[str]) -> list[Case]:
    """Batches of 1, 3, 8 and 16 from `sentences`, each awkward text alone and in a batch,
    and the two invalid requests."""
    cases = [Case(f"batch{n}", tuple((sentences * 16)[:n])) for n in (1, 3, 8, 16)]
    cases += [Case(f"awkward{i}", (text,)) for i, text in enumerate(AWKWARD)]
    cases.append(Case("awkward_batch", (*AWKWARD, *sentences[:2])))
    cases += [Case("bad_dtype", invalid="dtype"), Case("bad_signature", invalid="signature")]
    return cases


def send(client: BatchingClient, case: Case) -> list[dict]:
    """Sends one case through `client`'s own batching (`predict`: one request per batch of its
    batch size); invalid cases as one request, through the client's own send-and-check step,
    whatever they hold."""
    if not case.invalid:
        return client.predict(case.sentences)
    signature = "no_such_signature" if case.invalid == "signature" else client.signature
    if isinstance(client, GrpcServingClient):
        request = make_predict_request(["olá ."], client.model_name, signature)
        if case.invalid == "dtype":
            request.inputs["sentences"].CopyFrom(tf.make_tensor_proto([1, 2]))
        return client._call(request)
    body = make_request(["olá ."], signature, client.form)
    if case.invalid == "dtype":
        body = {"signature_name": signature, "instances": [1, 2]}
    return client._post(body)


def refused(error: ServingError) -> bool:
    """An invalid request's intended answer: HTTP 400 or gRPC INVALID_ARGUMENT."""
    return error.status == 400 or error.code == "INVALID_ARGUMENT"


@dataclass
class LoadResult:
    """What the load saw. `errors` are failures other than the intended refusals."""

    requests: int = 0  # cases sent
    sent: int = 0  # the requests they took (see `Case.requests`)
    refused: int = 0
    errors: int = 0
    mismatches: int = 0
    latencies: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the first few, to say what went wrong

    def add(self, other: LoadResult) -> None:
        self.requests += other.requests
        self.sent += other.sent
        self.refused += other.refused
        self.errors += other.errors
        self.mismatches += other.mismatches
        self.latencies += other.latencies
        self.problems += other.problems[: max(0, 10 - len(self.problems))]


def serial_answers(client: BatchingClient, cases: list[Case]) -> dict[str, list[dict]]:
    """Each valid case's answer, asked alone: what every answer under load must equal."""
    return {case.name: send(client, case) for case in cases if not case.invalid}


def run_load(
    client: BatchingClient,
    cases: list[Case],
    expected: dict[str, list[dict]],
    *,
    threads: int = 8,
    requests_per_thread: int = 200,
    seed: int = 0,
) -> LoadResult:
    """`threads` threads share `client` and each sends `requests_per_thread` cases drawn at
    random; every answer is checked against `expected` (or, invalid, must be refused)."""
    start = threading.Barrier(threads)

    def worker(index: int) -> LoadResult:
        draw = random.Random(seed * 1000 + index)
        result = LoadResult()
        start.wait()  # all threads at once: the server sees `threads` requests in flight
        for _ in range(requests_per_thread):
            case = draw.choice(cases)
            began = time.perf_counter()
            try:
                answer = send(client, case)
            except ServingError as error:
                if case.invalid and refused(error):
                    result.refused += 1
                else:
                    result.errors += 1
                    result.problems.append(f"{case.name}: {error}")
            except Exception as error:  # noqa: BLE001 (anything else is an error to count)
                result.errors += 1
                result.problems.append(f"{case.name}: {type(error).__name__}: {error}")
            else:
                if case.invalid:
                    result.errors += 1
                    result.problems.append(f"{case.name}: answered, but should be refused")
                elif answer != expected[case.name]:
                    result.mismatches += 1
                    result.problems.append(f"{case.name}: answer differs from the serial one")
            result.latencies.append(time.perf_counter() - began)
            result.requests += 1
            result.sent += case.requests(client.batch_size)
        return result

    total = LoadResult()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for result in pool.map(worker, range(threads)):
            total.add(result)
    return total
