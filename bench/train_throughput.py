"""Training throughput: our train step against the tutorial's, in target tokens per second.

Run from the repository root::

    .venv/bin/python bench/train_throughput.py [--rounds 2] [--batches 4]
    .venv/bin/python bench/train_throughput.py --mixed-precision bfloat16 [--loss-steps 300]
    .venv/bin/python bench/train_throughput.py --json train.json   # the figures as JSON too

Data: the TED pt→en validation set (`../shared/data/ted_hrlr_validation/dev.*`, 1,193 pairs),
tokenized with WordPiece vocabularies learned from that text. Both models are the tutorial
preset (4 layers, d_model 128, 8 heads, dff 512, vocab 7765/7010) in the same process.

* "same batches": the baseline's padded batches of 64 sentences fed to both train steps, A B A B
  per batch; the figure is the median of per-batch time ratios.
* "our batches": one pass over the same sentences, ours in token-budget bucketed batches
  (`make_batches`, `TrainConfig().token_budget`), the baseline in its padded batches of 64;
  tokens/s counts real (non-PAD) target tokens, so the padding each side computes is its own
  cost. Passes alternate; the figure is the median of per-round ratios.
* "mfu": our model FLOPs per second on our batches (matmul FLOPs of forward and backward,
  3 x the forward, counting real tokens) over the best `tf.matmul` FLOP/s measured here.
* `--mixed-precision bfloat16`: our step under `mixed_bfloat16` against our float32 step,
  both from the same initial weights, trained in lockstep on the same sequence of our batches
  (`--loss-steps` steps, cycling over them), A B A B: the figure is the median of per-step
  time ratios (float32 / bfloat16) after the first pass; the loss agreement compares the two
  runs' mean loss over their last 50 steps (dropout draws differ between the two).

A benchmark prints numbers, it does not pass or fail. The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO.parent / "shared" / "bench"))

import numpy as np
import tensorflow as tf
from json_figures import add_json_flags, write_json

from tf_transformer.config import ModelConfig, TrainConfig, get_preset
from tf_transformer.data.pipeline import make_batches, padded_batches
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.model import Transformer
from tf_transformer.text.tokenizers import build_tokenizers
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep

DATA = REPO.parent / "shared" / "data" / "ted_hrlr_validation"


def load_pairs() -> tf.data.Dataset:
    pt = (DATA / "dev.pt").read_text(encoding="utf-8").splitlines()
    en = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()
    return tf.data.Dataset.from_tensor_slices((pt, en))


def real_tokens(batch) -> int:
    """Non-PAD target tokens of a `((src, tgt_in), tgt_out)` batch."""
    return int(np.count_nonzero(batch[1].numpy()))


def train_flops(batch, config: ModelConfig) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward), real tokens only.

    Projections and feed-forward cost `2 * d_in * d_out` per real token; attention scores and
    the weighted sum `4 * len_k * d_model` per real query over the padded key length.
    """
    (src, tgt_in), _ = batch
    d, dff, layers = config.d_model, config.dff, config.num_layers
    n_src = np.count_nonzero(src.numpy())
    n_tgt = np.count_nonzero(tgt_in.numpy())
    len_src, len_tgt = src.shape[1], tgt_in.shape[1]
    encoder = n_src * (2 * (4 * d * d + 2 * d * dff) + 4 * len_src * d)
    decoder = n_tgt * (2 * (6 * d * d + 2 * d * dff) + 4 * (len_tgt + len_src) * d)
    cross_kv = n_src * 2 * 2 * d * d
    logits = n_tgt * 2 * d * config.target_vocab_size
    return 3.0 * (layers * (encoder + decoder + cross_kv) + logits)


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """The best float32 `tf.matmul` FLOP/s of an `n x n` product on this machine."""
    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    tf.matmul(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        tf.matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


def timed(step, *args) -> float:
    start = time.perf_counter()
    out = step(*args)
    tf.nest.map_structure(lambda t: t.numpy(), out)  # wait for the result
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes of each side, alternating")
    parser.add_argument("--batches", type=int, default=4, help="padded batches of 64 timed")
    parser.add_argument("--jit-compile", action="store_true", help="XLA for our train step")
    parser.add_argument(
        "--mixed-precision",
        choices=("bfloat16",),
        default=None,
        help="also measure our step under this policy against float32",
    )
    parser.add_argument("--loss-steps", type=int, default=300, help="lockstep bfloat16 steps")
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    started = time.perf_counter()

    import baseline  # ../shared/bench/baseline.py

    tf.keras.utils.set_random_seed(0)
    pairs = load_pairs()
    tokenizers = build_tokenizers(pairs, 8000, learn_params={"num_iterations": 1})
    train_config = TrainConfig()
    common = {"max_tokens": train_config.max_tokens, "shuffle": False, "seed": 0}
    padded = list(padded_batches(pairs, tokenizers, batch_size=64, **common))[: args.batches]
    # Our batches hold the same sentences as the padded ones timed.
    sentences = 64 * len(padded)
    ours_batches = list(make_batches(pairs.take(sentences), tokenizers, **common))

    config = get_preset("tutorial")
    model = Transformer.from_config(config)
    model.build()
    steps = TrainStep(
        model,
        make_optimizer(config.d_model, train_config),
        label_smoothing=train_config.label_smoothing,
    )
    ours = steps.train_step
    if args.jit_compile:
        ours = tf.function(
            steps._train_step, input_signature=ours.input_signature, jit_compile=True
        )
    theirs = baseline.BaselineTrainer()

    def run_theirs(batch):
        (src, tgt_in), tgt_out = batch
        tgt = tf.concat([tgt_in[:, :1], tgt_out], axis=1)  # START + the targets
        return theirs.train_step(src, tgt)

    # Trace and build the optimizers (one trace each: both steps have (None, None) signatures).
    timed(ours, padded[0])
    timed(run_theirs, padded[0])
    tokens = sum(real_tokens(b) for b in padded)
    assert tokens == sum(real_tokens(b) for b in ours_batches), "batches differ"
    padding = 1 - tokens / sum(b[1].shape[0] * b[1].shape[1] for b in padded)
    padding_ours = 1 - tokens / sum(b[1].shape[0] * b[1].shape[1] for b in ours_batches)
    print(
        f"tutorial preset; {sentences} TED dev sentences, {tokens} target tokens; "
        f"{len(padded)} padded batches of 64 ({padding:.0%} target padding) vs "
        f"{len(ours_batches)} bucketed batches ({padding_ours:.0%}); xla={args.jit_compile}"
    )

    same_ratios, own_ratios = [], []
    t_ours_own, t_theirs_all = [], []
    for _ in range(args.rounds):
        t_theirs = t_ours = 0.0
        for batch in padded:  # identical batches, A B A B
            a = timed(run_theirs, batch)
            b = timed(ours, batch)
            same_ratios.append(a / b)
            t_theirs += a
            t_ours += b
        t_own = sum(timed(ours, batch) for batch in ours_batches)
        own_ratios.append(t_theirs / t_own)
        t_ours_own.append(t_own)
        t_theirs_all.append(t_theirs)

    flops = sum(train_flops(b, config) for b in ours_batches)
    peak = matmul_peak()
    t_own = statistics.median(t_ours_own)
    mfu = flops / t_own / peak
    same = statistics.median(same_ratios)
    own = statistics.median(own_ratios)
    print(f"baseline, padded batches of 64: {tokens / statistics.median(t_theirs_all):7.0f} tok/s")
    print(f"ours, same batches:             {same:7.2f}x the baseline (median per batch)")
    print(f"ours, bucketed batches:         {tokens / t_own:7.0f} tok/s, {own:.2f}x the baseline")
    print(f"model FLOP/s {flops / t_own / 1e9:.2f} G of a matmul peak {peak / 1e9:.1f} G")
    ratios = (
        f"train_tokens_per_s={own:.2f} train_tokens_per_s_same_batches={same:.2f} mfu={mfu:.3f}"
    )
    figures = {
        "sentences": sentences,
        "target_tokens": tokens,
        "padded_batches": len(padded),
        "bucketed_batches": len(ours_batches),
        "target_padding_padded": padding,
        "target_padding_bucketed": padding_ours,
        "baseline_tokens_per_s": tokens / statistics.median(t_theirs_all),
        "ours_tokens_per_s": tokens / t_own,
        "train_tokens_per_s": own,
        "train_tokens_per_s_same_batches": same,
        "mfu": mfu,
    }
    if args.mixed_precision:
        speedup = compare_precision(config, train_config, ours_batches, args.loss_steps)
        ratios += f" bf16_vs_fp32={speedup:.2f}"
        figures["bf16_vs_fp32"] = speedup
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    print(f"ratios: {ratios}")
    write_json(args, "train_throughput", figures)


def compare_precision(config, train_config, batches, steps: int) -> float:
    """Our step under mixed_bfloat16 against float32, in lockstep; returns the speed-up."""
    models = {}
    for precision in (None, "bfloat16"):
        tf.keras.utils.set_random_seed(0)
        model = build_model(config, precision)
        optimizer = make_optimizer(config.d_model, train_config)
        optimizer.build(model.trainable_variables)
        models[precision] = TrainStep(
            model, optimizer, label_smoothing=train_config.label_smoothing
        )
    for a, b in zip(models[None].model.weights, models["bfloat16"].model.weights):
        b.assign(a)  # the same initial weights (float32 variables in both)
    losses = {precision: [] for precision in models}
    ratios = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        seconds = {}
        for precision, steps_of in models.items():
            start = time.perf_counter()
            sums = steps_of.train_step(batch)
            losses[precision].append(float(sums["loss_sum"]) / float(sums["tokens"]))
            seconds[precision] = time.perf_counter() - start
        if step >= len(batches):  # after the first pass (tracing, warm-up)
            ratios.append(seconds[None] / seconds["bfloat16"])
    speedup = statistics.median(ratios)
    fp32, bf16 = (np.array(losses[p]) for p in (None, "bfloat16"))
    last = slice(-min(50, steps), None)
    agreement = float(np.mean(bf16[last]) / np.mean(fp32[last]) - 1.0)
    print(
        f"bfloat16 vs float32, our batches, {steps} lockstep steps: {speedup:.2f}x the float32 "
        f"step (median per step); loss {fp32[0]:.3f} -> {fp32[-1]:.3f} (float32), "
        f"{bf16[0]:.3f} -> {bf16[-1]:.3f} (bfloat16); mean loss of the last 50 steps "
        f"{np.mean(fp32[last]):.4f} and {np.mean(bf16[last]):.4f} ({agreement:+.2%})"
    )
    for at in sorted({min(steps, n) - 1 for n in (1, 50, 100, 200, steps)}):
        print(f"  step {at + 1:4d}: loss float32 {fp32[at]:.4f}  bfloat16 {bf16[at]:.4f}")
    return speedup


if __name__ == "__main__":
    main()
