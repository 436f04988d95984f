"""The training batches of a run (`training.start.inputs`): on a corpus streamed from gzip and
plain shards, a killed run resumes at the next unseen batch of its epoch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.data.test_corpus import PAIRS, write_shards
from tests.training.test_loop import TRAIN, _start_worker, kill_then_resume
from tf_transformer.config import DataConfig, get_preset
from tf_transformer.data.mix import Mix
from tf_transformer.run_dir import RunDir
from tf_transformer.text.tokenizers import build_tokenizers
from tf_transformer.training.loop import train
from tf_transformer.training.start.inputs import epoch_batches

pytestmark = pytest.mark.cost(60)  # estimated: 13 s alone, about 5x that in make test

# Batches of a few pairs: an epoch of the 230 pairs is about 30 steps.
CONFIG = TRAIN.replace(token_budget=48, max_tokens=16, shuffle_buffer=64)


def _run_parts(root: Path):
    """The sharded corpus's mix and the tokenizers saved beside it, and the model for them."""
    mix = Mix.load(DataConfig(dataset=str(root / "corpus"), corpus_shuffle_buffer=40))
    tokenizers = RunDir(root / "tokens").load_tokenizers()
    sizes = {
        "input_vocab_size": int(tokenizers.source.get_vocab_size()),
        "target_vocab_size": int(tokenizers.target.get_vocab_size()),
    }
    return epoch_batches(mix, tokenizers, CONFIG), get_preset("tiny").replace(**sizes)


def streamed_worker(run_dir: str, max_steps: int, sleep: float) -> None:
    """The process the test kills: it trains on the sharded corpus beside `run_dir`."""
    import time

    batches, model = _run_parts(Path(run_dir).parent)
    config = CONFIG.replace(max_steps=max_steps)
    train(run_dir, model, config, batches, progress=False, on_step=lambda *_: time.sleep(sleep))


@pytest.mark.slow
def test_a_killed_run_on_a_streamed_sharded_corpus_resumes_at_the_next_unseen_batch(tmp_path):
    write_shards(tmp_path / "corpus", PAIRS, layout="shards")  # plain and gzip shards
    mix = Mix.load(DataConfig(dataset=str(tmp_path / "corpus")))
    tokenizers = build_tokenizers(mix.sample(1000, 0), vocab_size=200)
    tokenizers.save(str(RunDir(tmp_path / "tokens").tokenizers_path))
    run_dir = tmp_path / "interrupted"
    target = "tests.training.start.test_inputs.streamed_worker"
    batches, model = _run_parts(tmp_path)
    config = CONFIG.replace(max_steps=1000)
    killed_at, resumed = kill_then_resume(
        run_dir,
        _start_worker(run_dir, 1000, 0.1, target=target),
        lambda on_step: train(run_dir, model, config, batches, progress=False, on_step=on_step),
    )
    # It was killed inside an epoch (of 50 batches here: killed at step 10 or 20, 1 s apart).
    ends = np.cumsum([sum(1 for _ in batches(epoch)) for epoch in range(4)])
    assert killed_at not in ends and killed_at < ends[-1], (killed_at, ends)
    # The same seed, never interrupted, stopped at the same step: identical weights, so the
    # resumed run took the batches the killed one had not.
    fresh = train(
        tmp_path / "fresh", model, CONFIG.replace(max_steps=killed_at + 5), batches, progress=False
    )
    for a, b in zip(resumed.model.weights, fresh.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
