"""Multi-worker training with real processes: two workers on 127.0.0.1, each with its TF_CONFIG.

Two worker processes (`MultiWorkerMirroredStrategy` over gRPC, one CPU replica each) train the
tiny preset on a 200-pair corpus (a 16-pair dev split keeps the evaluations at epoch ends short)
with the custom loop, then with `model.fit`, in the same processes (one process start and one
strategy for both). The reference is one process with the same global batch:
`accumulate_steps=2`, i.e. the same two batches per update. The kill test checkpoints every 2
steps, so the worker is killed early and the resumed run is short (tracing, not steps, costs).
With `shard_data`, two workers train one epoch of a 61-pair corpus, each its own part.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.cost(190), pytest.mark.processes]  # cost: seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = 20
# 256-token batches of ~10-token sentences: 22 batches of different sizes an epoch, so the 20
# steps of two batches cross an epoch end (two epochs of `fit`). The learning rate cools down
# over the last half of the steps: every worker must apply the same.
TRAIN_CHANGES = {
    "max_steps": STEPS,
    "epochs": None,
    "token_budget": 256,
    "checkpoint_every": 10,
    "cooldown": 0.5,
}
MODES = ("loop", "fit")
CLI_FLAGS = ["--preset", "tiny", "--token-budget", "256", "--seed", "0", "--quiet"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from tf_transformer.data.sample import sample_pairs

    folder = tmp_path_factory.mktemp("corpus")
    for split, count in (("train", 200), ("dev", 16)):
        pairs = sample_pairs(split)[:count]
        (folder / f"{split}.tsv").write_text("".join(f"{pt}\t{en}\n" for pt, en in pairs))
    return folder


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def worker(run_dir: str, corpus: str, strategy: str, accumulate_steps: int) -> None:
    """One training process (a worker, or the one-process reference): trains `run_dir/loop`
    with the custom loop, then `run_dir/fit` with `model.fit`; JSON lines on stdout."""
    import gc

    from tf_transformer import training
    from tf_transformer.cli import TRACING_GC_THRESHOLD
    from tf_transformer.config import DataConfig, get_preset, get_train_preset

    gc.set_threshold(*TRACING_GC_THRESHOLD)  # as in the test processes (tests/conftest.py)

    config = get_train_preset("tiny").replace(
        **TRAIN_CHANGES, strategy=strategy, accumulate_steps=accumulate_steps
    )
    for mode in MODES:

        def on_step(step, metrics, mode=mode):
            print(json.dumps({"mode": mode, "step": step, **metrics}), flush=True)

        result = training.run(
            Path(run_dir) / mode,
            DataConfig(dataset=corpus),
            get_preset("tiny"),
            config,
            fit=mode == "fit",
            progress=False,
            on_step=on_step,
        )
        losses = [epoch["loss"] for epoch in result.history] if mode == "fit" else []
        print(json.dumps({"mode": mode, "final": result.step, "fit_losses": losses}), flush=True)


def _start(arguments: list[str], index: int, ports: list[int], tmp: Path) -> subprocess.Popen:
    """Worker `index` of a cluster on `ports`, with its own TF_CONFIG and temporary folder."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
    temporary = tmp / f"tmp-worker{index}"
    temporary.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(temporary)
    )
    return subprocess.Popen(
        [sys.executable, *arguments],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start_workers(arguments: list[str], tmp: Path) -> list[subprocess.Popen]:
    ports = free_ports(2)
    return [_start(arguments, index, ports, tmp) for index in range(2)]


# Margins for a machine 3-4x slower than the 2-core AMD EPYC with AVX-512 (issue 47): what a
# worker may take, and how long the chief may take to notice a lost peer (the coordination
# service's ~10 s of missed heartbeats, then its one line); 300 and 120 s before.
WORKER_TIMEOUT = 900.0
LOST_PEER_TIMEOUT = 300.0


def _finish(process: subprocess.Popen, timeout: float = WORKER_TIMEOUT) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"a worker hung: {err[-3000:]}") from None
    return process.returncode, out, err


def _records(stdout: str, mode: str) -> tuple[list[dict], dict]:
    """`mode`'s step records and its final line."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    lines = [line for line in lines if line["mode"] == mode]
    return [line for line in lines if "step" in line], lines[-1]


def _worker_code(run_dir: Path, corpus: Path, strategy: str, accumulate: int) -> list:
    call = f"worker({str(run_dir)!r}, {str(corpus)!r}, {strategy!r}, {accumulate})"
    return ["-c", f"from tests.training.test_multiworker import worker; {call}"]


def _weights(run_dir: Path) -> list[np.ndarray]:
    from tf_transformer.run_dir import RunDir

    return [w.numpy() for w in RunDir(run_dir).load_model("latest").trainable_variables]


def _assert_only_the_chief_wrote(run_dir: Path, tmp: Path) -> None:
    from tf_transformer.run_dir import RunDir

    run = RunDir(run_dir)
    assert run.exists() and run.tokenizers_path.is_dir()
    assert run.latest_checkpoint().endswith(f"ckpt-{STEPS}")
    for folder in (p for p in run.logs_path.rglob("*") if p.is_dir()):
        events = list(folder.glob("events.out.tfevents.*"))
        assert len(events) <= 1, events  # one writer per folder: the chief's
    for index in range(2):  # the workers' scratch folders were removed
        assert not list((tmp / f"tmp-worker{index}").glob("tf_transformer_worker_*"))


def _train_two_workers(tmp: Path, corpus) -> tuple[Path, Path, list[tuple[int, str, str]]]:
    """The two workers' run dir, their scratch folders' parent and `_finish` results. A job
    whose coordination service lost a worker before its first step (its heartbeats starved on
    a loaded machine: seen in a fresh clone's `make test` beside other work, at the first
    variable broadcast) is run once more, in a new run dir; any other failure, or a second
    one, is the result."""
    for attempt in (1, 2):
        run_dir, scratch = tmp / f"two_workers_{attempt}", tmp / f"scratch_{attempt}"
        workers = _start_workers(_worker_code(run_dir, corpus, "multiworker", 1), scratch)
        results = [_finish(process) for process in workers]
        started = any('"step"' in out for _, out, _ in results)
        lost = any("stopped sending heartbeats" in err for _, _, err in results)
        if attempt == 2 or started or not lost or all(code == 0 for code, _, _ in results):
            return run_dir, scratch, results
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus) -> tuple[Path, Path, list[str], str]:
    """Two workers and the one-process reference, each trained with the loop, then with fit:
    (the workers' run dir, the reference's, the workers' stdout, the reference's stdout)."""
    tmp = tmp_path_factory.mktemp("multiworker")
    run_dir, scratch, results = _train_two_workers(tmp, corpus)
    one = tmp / "one"
    # The reference runs after the workers, not beside them: two workers and a third process
    # on two cores (and make test's other worker) starved the workers' heartbeats into "task:1
    # stopped sending heartbeats" twice under load.
    reference = subprocess.run(
        [sys.executable, *_worker_code(one, corpus, "default", 2)],
        cwd=REPO_ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT,
        check=False,
    )
    codes = [*results, (reference.returncode, "", reference.stderr)]
    assert all(code == 0 for code, _, _ in codes), "\n=====\n".join(
        err[-3000:] for _, _, err in codes
    )
    for mode in MODES:
        _assert_only_the_chief_wrote(run_dir / mode, scratch)
    return run_dir, one, [out for _, out, _ in results], reference.stdout


def _finished(trained, mode: str) -> tuple[tuple, tuple, tuple]:
    """`mode`'s (records, final line) of the chief, the other worker and the reference, each
    trained to STEPS."""
    _, _, outs, reference = trained
    chief, other = (_records(out, mode) for out in outs)
    one = _records(reference, mode)
    assert chief[1]["final"] == other[1]["final"] == one[1]["final"] == STEPS
    return chief, other, one


@pytest.mark.slow
def test_two_workers_match_one_process_with_the_same_global_batch_loop(trained):
    chief, other, (one, _) = _finished(trained, "loop")
    # Both workers report the global sums, the same in both.
    assert chief[0] == other[0] and len(chief[0]) == STEPS
    # Every update trained on the same tokens as the reference's: the two workers' batches
    # together are the reference's two batches (no batch repeated, none left out).
    assert [r["tokens"] for r in chief[0]] == [r["tokens"] for r in one]
    # The same losses up to float summation order: 1e-5 for the first steps; later, Adam
    # turns rounding differences of near-zero gradients into whole steps (2e-3 allowed).
    losses, expected = ([r["loss"] for r in records] for records in (chief[0], one))
    np.testing.assert_allclose(losses[:10], expected[:10], rtol=1e-5)
    np.testing.assert_allclose(losses, expected, rtol=2e-3)


@pytest.mark.slow
def test_two_workers_match_one_process_with_the_same_global_batch_fit(trained):
    run_dir, one, _, _ = trained
    chief, _, (_, one_final) = _finished(trained, "fit")
    # Per replica Keras divides a batch's token mean by the replicas and sums: the mean of
    # the two batches' means, which is what its gradient accumulation applies too.
    assert len(one_final["fit_losses"]) == 2  # an epoch end, and a reshuffled second epoch
    np.testing.assert_allclose(chief[1]["fit_losses"], one_final["fit_losses"], rtol=1e-5)
    for a, b in zip(_weights(run_dir / "fit"), _weights(one / "fit")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_killed_worker_stops_the_job_and_resume_continues(tmp_path, corpus):
    run_dir = tmp_path / "run"
    cli = ["-m", "tf_transformer.cli", "train", "--dataset", str(corpus), *CLI_FLAGS]
    cli += ["--run-dir", str(run_dir), "--strategy", "multiworker", "--checkpoint-every", "2"]
    cli += ["--heartbeat-timeout", "10"]  # the kill is found by the heartbeats: TensorFlow's 10 s
    chief, other = _start_workers([*cli, "--max-steps", "1000"], tmp_path)
    state = run_dir / "checkpoints" / "checkpoint"
    deadline = time.monotonic() + WORKER_TIMEOUT
    while not state.is_file():
        assert chief.poll() is None and other.poll() is None, chief.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.1)
    other.send_signal(signal.SIGKILL)
    other.communicate()

    # The chief stops with one clear line (exit code 2), it does not wait for ever.
    started = time.monotonic()
    code, _, err = _finish(chief, timeout=LOST_PEER_TIMEOUT)
    assert code == 2, err[-3000:]
    assert "a worker of the multi-worker job stopped" in err and "--resume" in err, err[-3000:]
    # The cause: the coordination service's heartbeats, or the transport (the peer's socket
    # refused, or reset when the kill lands inside a collective's transfer).
    causes = ("stopped sending heartbeats", "Connection refused", "Connection reset by peer")
    causes += ("Socket closed",)
    assert any(cause in err for cause in causes), err[-3000:]
    assert time.monotonic() - started < LOST_PEER_TIMEOUT

    # Relaunched with --resume, both workers continue from the last checkpoint.
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    killed_at = int(latest.rsplit("-", 1)[1])
    written = Path(f"{latest}.index").stat().st_mtime_ns
    resume = [*cli, "--resume", "--max-steps", str(killed_at + 4)]
    results = [_finish(process) for process in _start_workers(resume, tmp_path)]
    for code, out, err in results:
        assert code == 0, err[-3000:]
        assert f"trained to step {killed_at + 4} " in out, out
    assert Path(f"{latest}.index").stat().st_mtime_ns == written  # not trained again
    last = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    assert last.endswith(f"ckpt-{killed_at + 4}")


# `shard_data`: one epoch of 61 pairs in batches of 64 tokens, so the two workers' parts (31
# and 30 pairs, every other line: the file is one piece) make different numbers of batches.
SHARD_CHANGES = {"epochs": 1, "max_steps": None, "token_budget": 64, "shard_data": True}


def shard_worker(run_dir: str, corpus: str, max_steps: int | None) -> None:
    """A worker of a `shard_data` run of one epoch (stopped after `max_steps`, or resumed to
    the epoch's end); its step records on stdout."""
    from tf_transformer import training
    from tf_transformer.config import DataConfig, get_preset, get_train_preset

    config = get_train_preset("tiny").replace(**SHARD_CHANGES, strategy="multiworker")
    config = config.replace(max_steps=max_steps)

    def on_step(step, metrics):
        print(json.dumps({"mode": "shard", "step": step, **metrics}), flush=True)

    result = training.run(
        run_dir, DataConfig(dataset=corpus), get_preset("tiny"), config, progress=False,
        on_step=on_step,
    )  # fmt: skip
    print(json.dumps({"mode": "shard", "final": result.step}), flush=True)


def _epoch_batches(run_dir: Path, corpus: Path, shard) -> tuple[int, int]:
    """`(batches, target tokens)` of epoch 0 of the run's pipeline for `shard`."""
    from tf_transformer.config import DataConfig, get_train_preset
    from tf_transformer.data.mix import Mix
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import EpochBatches

    config = get_train_preset("tiny").replace(**SHARD_CHANGES)
    mix = Mix.load(DataConfig(dataset=str(corpus)))
    batches = EpochBatches(mix, RunDir(run_dir).load_tokenizers(), config)(0, shard)
    targets = [target.numpy() for (_, _), target in batches]
    return len(targets), int(sum(np.count_nonzero(target) for target in targets))


@pytest.mark.slow
def test_with_shard_data_each_worker_trains_its_own_part_of_the_epoch(tmp_path):
    from tf_transformer.data.sample import sample_pairs

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, count in (("train", 61), ("dev", 8)):
        pairs = sample_pairs(split)[:count]
        (corpus / f"{split}.tsv").write_text("".join(f"{pt}\t{en}\n" for pt, en in pairs))
    run_dir = tmp_path / "run"
    records = []
    for max_steps in (3, None):  # stopped after 3 steps, then resumed to the epoch's end
        call = f"shard_worker({str(run_dir)!r}, {str(corpus)!r}, {max_steps})"
        code = ["-c", f"from tests.training.test_multiworker import shard_worker; {call}"]
        results = [_finish(process) for process in _start_workers(code, tmp_path)]
        errors = "\n=====\n".join(err[-3000:] for *_, err in results)
        assert all(code == 0 for code, _, _ in results), errors
        (chief, chief_final), (other, _) = (_records(out, "shard") for _, out, _ in results)
        assert chief == other  # both report the global sums
        records.append(chief)
    assert [r["step"] for r in records[0]] == [1, 2, 3] and records[1][0]["step"] == 4
    chief = records[0] + records[1]
    parts = [_epoch_batches(run_dir, corpus, (index, 2)) for index in range(2)]
    whole = _epoch_batches(run_dir, corpus, (0, 1))
    assert parts[0][0] != parts[1][0]  # the workers' batch counts differ
    # The job ran as many steps as the longer part has batches (the other worker trained empty
    # batches at the end), and together they trained every target token of the epoch once:
    # the resumed run went on from each worker's next unseen batch.
    assert chief_final["final"] == len(chief) == max(p[0] for p in parts)
    assert sum(record["tokens"] for record in chief) == parts[0][1] + parts[1][1] == whole[1]
