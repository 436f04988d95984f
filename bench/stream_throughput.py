"""Training tokens/s on a streamed corpus against the same pairs held in memory, in one process.

Run from the repository root::

    .venv/bin/python bench/stream_throughput.py [--pairs 200000] [--steps 40] [--rounds 5]
        [--preset tiny] [--json PATH]

Issue 48 moved text corpora from Python lists turned into one tensor constant (the pairs in
memory) to tf.data streams read from their files (`data.corpus.FileCorpus`: pieces read at byte
offsets, 16 at once, shuffled in windows). This bench asks whether training pays for that. It
writes a synthetic corpus of `--pairs` pairs (`bench/data_scale.py`'s) to a temporary folder,
learns the preset's tokenizers from it once, and builds the epoch's batches twice, as `train`
does (`training.start.inputs.EpochBatches`, the preset's settings):

* streamed: `Mix.load` of the files;
* memory: the same pairs read into memory, `DatasetCorpus(Dataset.from_tensor_slices(...))`.

One `TrainStep` (the preset's model) trains from both in turn, `--steps` updates of one, then of
the other, for `--rounds` rounds; each pipeline's iterator stays open between its turns, so it
prefetches while the other trains, as both would beside training. tokens/s counts real target
tokens over a turn's wall time; the ratio is the median over rounds of streamed tokens/s over
memory tokens/s (1.00: the same speed). The first round (tracing, the pipelines' start) is not
counted. A benchmark prints numbers, it does not pass or fail. The last line is
machine-readable::

    stream: tokens_per_s_streamed=... tokens_per_s_memory=... streamed_vs_memory=...
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import tensorflow as tf
from data_scale import write_corpus
from json_figures import add_json_flags, write_json

from tf_transformer.config import DataConfig, get_preset, get_train_preset
from tf_transformer.data.corpus import DatasetCorpus
from tf_transformer.data.mix import Mix
from tf_transformer.hardware.cpu import describe_cpu
from tf_transformer.model import Transformer
from tf_transformer.text.tokenizers import build_tokenizers
from tf_transformer.training.loop import as_int64
from tf_transformer.training.start.inputs import EpochBatches
from tf_transformer.training.step.schedule import make_optimizer
from tf_transformer.training.step.train_step import TrainStep


def in_memory(mix: Mix) -> Mix:
    """`mix`'s one corpus as its pairs held in memory (a tensor constant)."""
    sources, targets = [], []
    for source, target in mix.corpora[0].pairs().batch(65536).as_numpy_iterator():
        sources += list(source)
        targets += list(target)
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    return Mix(["memory"], [DatasetCorpus(pairs, len(sources))], [1.0], mix.shuffle_buffer)


def turn(steps: TrainStep, updates, count: int) -> float:
    """Trains `count` updates from the iterator `updates`; returns target tokens per second."""
    tokens, start = 0.0, time.perf_counter()
    for _ in range(count):
        tokens += float(steps.update(next(updates))["tokens"])
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=40, help="updates per turn")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--tmp", default=None, help="Where to write the corpus (default: TMPDIR).")
    add_json_flags(parser)
    args = parser.parse_args()
    cpu = describe_cpu()
    print(cpu, flush=True)
    train_config = get_train_preset(args.preset)
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        folder = Path(tmp) / "corpus"
        write_corpus(folder, args.pairs)
        streamed = Mix.load(DataConfig(dataset=str(folder)))
        memory = in_memory(streamed)
        tokenizers = build_tokenizers(
            streamed.sample(train_config.vocab_sample, seed=0),
            vocab_size=train_config.vocab_size,
            learn_params={"max_input_tokens": train_config.vocab_max_words},
        )
        model_config = get_preset(args.preset).replace(
            input_vocab_size=int(tokenizers.source.get_vocab_size()),
            target_vocab_size=int(tokenizers.target.get_vocab_size()),
            max_length=max(get_preset(args.preset).max_length, train_config.max_tokens),
        )
        model = Transformer.from_config(model_config)
        model.build()
        optimizer = make_optimizer(model_config.d_model, train_config)
        steps = TrainStep(model, optimizer, label_smoothing=train_config.label_smoothing)
        iterators = {
            name: steps.updates(EpochBatches(mix, tokenizers, train_config)(0).map(as_int64))
            for name, mix in (("streamed", streamed), ("memory", memory))
        }
        rates = {name: [] for name in iterators}
        for round_index in range(args.rounds + 1):
            for name, updates in iterators.items():
                rate = turn(steps, updates, args.steps)
                if round_index:  # the first round traces and starts the pipelines
                    rates[name].append(rate)
            print(
                f"round {round_index}: "
                + " ".join(f"{n}={r[-1]:.0f}" for n, r in rates.items() if r)
            )
    ratio = statistics.median(a / b for a, b in zip(rates["streamed"], rates["memory"]))
    figures = {
        "tokens_per_s_streamed": round(statistics.median(rates["streamed"])),
        "tokens_per_s_memory": round(statistics.median(rates["memory"])),
        "streamed_vs_memory": round(ratio, 3),
    }
    print(
        f"{args.preset} preset, {args.pairs:,} pairs, {args.rounds} rounds of {args.steps} "
        "updates each (tokens/s: target tokens over wall time)"
    )
    write_json(args, "stream_throughput", {"pairs": args.pairs, "preset": args.preset, **figures})
    print("stream: " + " ".join(f"{key}={value}" for key, value in figures.items()))


if __name__ == "__main__":
    main()
