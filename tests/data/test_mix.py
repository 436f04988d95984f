"""Training on several corpora at once: the weighted mix, named dev sets, resume, bad corpora."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from tests.training.test_logs import read_scalars
from tf_transformer import cli
from tf_transformer.config import DataConfig, TrainConfig
from tf_transformer.data import mix as mix_module
from tf_transformer.data.mix import Mix
from tf_transformer.data.sample import sample_pairs
from tf_transformer.run_dir import RunDir

pytestmark = pytest.mark.cost(50)  # seconds in make test (measured)


def write_corpus(directory: Path, pairs, split: str = "train") -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.pt").write_text("".join(f"{pt}\n" for pt, _ in pairs))
    (directory / f"{split}.en").write_text("".join(f"{en}\n" for _, en in pairs))
    return str(directory)


def tagged(tag: str, size: int) -> list[tuple[str, str]]:
    """`size` pairs that say which corpus they come from."""
    return [(f"{tag} {i} pt", f"{tag} {i} en") for i in range(size)]


def epoch_pairs(mix: Mix, seed: int) -> list[tuple[bytes, bytes]]:
    """`mix.pairs(seed)`, every pair in order, read in batches (~1.4x faster than one by one)."""
    batches = mix.pairs(seed).batch(1024).as_numpy_iterator()
    return [pair for sources, targets in batches for pair in zip(sources, targets)]


def test_weighted_mix_shares_within_two_percent(tmp_path):
    sizes, weights = {"a": 3000, "b": 1500, "c": 500}, (0.2, 0.3, 0.5)
    specs = [write_corpus(tmp_path / tag, tagged(tag, size)) for tag, size in sizes.items()]
    mix = Mix.load(DataConfig(dataset=specs, dataset_weights=weights))
    assert mix.names == ["a", "b", "c"] and mix.sizes == [3000, 1500, 500]
    counts = dict.fromkeys(sizes, 0)
    epochs = [epoch_pairs(mix, epoch) for epoch in range(3)]  # 15,000 draws
    for epoch, pairs in enumerate(epochs):
        drawn = {tag: 0 for tag in sizes}
        for source, target in pairs:
            tag = source.decode().split()[0]
            assert target.decode().split()[:2] == source.decode().split()[:2]
            drawn[tag] += 1
        assert sum(drawn.values()) == 5000  # an epoch holds as many pairs as the corpora
        assert drawn == mix.shares(seed=epoch)  # what is logged is what was drawn
        counts = {tag: counts[tag] + drawn[tag] for tag in sizes}
    total = sum(counts.values())
    for tag, weight in zip(sizes, weights):
        assert abs(counts[tag] / total - weight) <= 0.02, counts
    # The same seed draws the same pairs (a new pipeline of seed 0), another seed others. (Each
    # pipeline costs ~1.3 s to start: the epochs above are the other reads.)
    first = list(mix.pairs(seed=0).take(50).as_numpy_iterator())
    assert first == epochs[0][:50]
    assert first != epochs[1][:50]


def test_one_corpus_epoch_holds_every_pair_once_each_epoch_in_its_own_order(tmp_path):
    pairs = tagged("s", 500)
    mix = Mix.load(
        DataConfig(dataset=write_corpus(tmp_path / "s", pairs), corpus_shuffle_buffer=64)
    )
    epochs = [[(s.decode(), t.decode()) for s, t in mix.pairs(seed).as_numpy_iterator()]
              for seed in (0, 1)]  # fmt: skip
    for epoch in epochs:
        assert sorted(epoch) == sorted(pairs)  # every pair, once
    assert epochs[0] != epochs[1] and epochs[0] != pairs
    assert mix.shares(0) == {"s": 500}


def test_each_epoch_draws_its_own_mix(tmp_path):
    specs = [write_corpus(tmp_path / "big", tagged("big", 10000)),
             write_corpus(tmp_path / "small", tagged("small", 1000))]  # fmt: skip
    config = DataConfig(dataset=specs, dataset_weights=(0.5, 0.5), corpus_shuffle_buffer=500)
    mix = Mix.load(config)
    drawn = []
    for seed in range(4):
        pairs = [source.decode() for source, _ in epoch_pairs(mix, seed)]
        assert len(pairs) == 11000
        counts = collections.Counter(source.split()[0] for source in pairs)
        assert dict(counts) == mix.shares(seed)  # what is logged is what was drawn
        assert abs(counts["big"] / 11000 - 0.5) <= 0.02
        drawn.append(frozenset(source for source in pairs if source.startswith("big")))
    # The down-weighted corpus gives about half of its pairs to each epoch, other ones each
    # time (its file read from another of its marks, every 1,000 lines): 4 epochs see it all.
    assert len(set(drawn)) == 4
    assert len(frozenset.union(*drawn)) >= 9500


def test_the_vocabulary_sample_is_drawn_by_the_weights(tmp_path):
    specs = [write_corpus(tmp_path / "a", tagged("a", 3000)),
             write_corpus(tmp_path / "b", tagged("b", 300))]  # fmt: skip
    mix = Mix.load(DataConfig(dataset=specs, dataset_weights=(0.25, 0.75)))
    assert mix.sample_sizes(2000) == [500, 1500]
    sample = [source.decode() for source, _ in mix.sample(2000, seed=0).as_numpy_iterator()]
    counts = collections.Counter(source.split()[0] for source in sample)
    assert abs(counts["a"] - 500) <= 3 * 500**0.5 and counts["b"] == 1500  # b: 5 passes, all
    a_numbers = [int(source.split()[1]) for source in sample if source.startswith("a")]
    assert len(set(a_numbers)) == len(a_numbers) and max(a_numbers) > 2500  # across the file
    assert sample == [s.decode() for s, _ in mix.sample(2000, seed=0).as_numpy_iterator()]
    # At least an epoch, default weights: every pair once.
    whole = Mix.load(DataConfig(dataset=specs))
    everything = sorted(s.decode() for s, _ in whole.sample(10**6, seed=0).as_numpy_iterator())
    assert everything == sorted(p for p, _ in tagged("a", 3000) + tagged("b", 300))


def test_default_weights_are_proportional_to_size(tmp_path):
    specs = [write_corpus(tmp_path / "x", tagged("x", 300)),
             write_corpus(tmp_path / "y", tagged("y", 100))]  # fmt: skip
    assert Mix.load(DataConfig(dataset=specs)).weights == [0.75, 0.25]


def test_the_flags_make_one_config(tmp_path):
    args = cli.build_parser().parse_args(
        ["train", "--dataset", "a", "--dataset", "b", "--dataset-weights", "1,3",
         "--dev-set", "d1", "--dev-set", "d2"]
    )  # fmt: skip
    from tf_transformer.commands.train import configs_from_args, data_from_args

    data = data_from_args(args)
    assert data == DataConfig(dataset=("a", "b"), dataset_weights=(1.0, 3.0), dev_set=("d1", "d2"))
    assert DataConfig.from_dict(json.loads(json.dumps(data.to_dict()))) == data
    assert DataConfig("sample").dataset == ("sample",)  # one spec is a one-corpus mix
    streamed = ["train", "--dataset", "a", "--corpus-shuffle-buffer", "500", "--vocab-sample", "7"]
    args = cli.build_parser().parse_args(streamed)
    assert data_from_args(args).corpus_shuffle_buffer == 500
    assert configs_from_args(args)[1].vocab_sample == 7
    assert (DataConfig().corpus_shuffle_buffer, TrainConfig().vocab_sample) == (100_000, 1_000_000)


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """A tiny run on two corpora (weights 1,3), validated on two named dev sets, then resumed."""
    root = tmp_path_factory.mktemp("mix")
    train, dev = sample_pairs("train", style="written"), sample_pairs("validation", style="written")
    first = write_corpus(root / "first", train[:300])
    write_corpus(root / "first", dev[:10], split="dev")
    second = write_corpus(root / "second", train[300:600])
    news = write_corpus(root / "news", dev[10:20], split="dev")
    run_dir = root / "run"
    flags = ["--preset", "tiny", "--quiet", "--vocab-size", "300", "--eval-every", "2",
             "--eval-sentences", "10", "--max-steps", "2", "--run-dir", str(run_dir)]  # fmt: skip
    command = ["train", "--dataset", first, "--dataset", second, "--dataset-weights", "1,3",
               "--dev-set", news, "--dev-set", first, *flags]  # fmt: skip
    assert cli.main(command) == 0
    recorded = json.loads((run_dir / "config.json").read_text())["data"]
    assert cli.main(["train", "--resume", "--run-dir", str(run_dir), "--max-steps", "4"]) == 0
    return RunDir(run_dir), recorded, (first, second, news)


@pytest.mark.slow
def test_config_records_the_mix_and_resume_keeps_it(mixed_run):
    run, recorded, (first, second, news) = mixed_run
    assert recorded["dataset"] == [first, second]
    assert recorded["dataset_weights"] == [0.25, 0.75]
    assert recorded["dev_set"] == [news, first]
    assert run.read_config()["data"] == recorded  # the resume kept it
    mix = json.loads((run.logs_path / "mix.json").read_text())
    assert mix["names"] == ["first", "second"] and mix["weights"] == [0.25, 0.75]
    assert sum(mix["epochs"]["0"].values()) == 600


@pytest.mark.slow
def test_each_dev_set_in_tensorboard_and_best_json(mixed_run):
    run, _, _ = mixed_run
    scalars = read_scalars(run.logs_path / "validation")
    for name in ("news", "first"):
        assert [step for step, _ in scalars[f"bleu/{name}"]] == [2, 4]
        assert [step for step, _ in scalars[f"chrf/{name}"]] == [2, 4]
    assert scalars["bleu"] == scalars["bleu/news"]  # the first dev set is the headline
    record = run.best_record()
    assert record["picked_by"] == "news"
    assert set(record["dev_sets"]) == {"news", "first"}
    assert record["bleu"] == record["dev_sets"]["news"]["bleu"]
    assert record["dev_sets"]["first"]["num_sentences"] == 10


def _one_error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tf-transformer train: error:"), lines
    return lines[0]


@pytest.mark.parametrize("problem", ["missing", "misaligned", "weights", "dev"])
def test_a_bad_corpus_is_one_line_exit_2_before_any_work(tmp_path, capsys, problem):
    good = write_corpus(tmp_path / "good", tagged("g", 20))
    bad = write_corpus(tmp_path / "bad", tagged("b", 20))
    flags = ["--dataset", good, "--dataset", bad]
    if problem == "missing":
        flags = ["--dataset", good, "--dataset", str(tmp_path / "nowhere")]
    elif problem == "misaligned":
        (tmp_path / "bad" / "train.en").write_text("one line\n")
    elif problem == "weights":
        flags += ["--dataset-weights", "1,2,3"]
    else:
        flags += ["--dev-set", str(tmp_path / "nowhere")]
    run_dir = tmp_path / "run"
    assert cli.main(["train", *flags, "--run-dir", str(run_dir), "--quiet"]) == 2
    line = _one_error(capsys)
    expected = {
        "missing": "nowhere",
        "misaligned": "misaligned",
        "weights": "3 weights for 2 corpora",
        "dev": "nowhere",
    }[problem]
    assert expected in line
    assert not run_dir.exists()  # no tokenizers, no config: nothing was started


def test_a_mix_without_any_dev_split_says_to_name_one(tmp_path, capsys):
    flags = ["--dataset", write_corpus(tmp_path / "p", tagged("p", 20)),
             "--dataset", write_corpus(tmp_path / "q", tagged("q", 20))]  # fmt: skip
    assert cli.main(["train", *flags, "--run-dir", str(tmp_path / "run"), "--quiet"]) == 2
    assert "--dev-set" in _one_error(capsys)


def test_a_large_corpus_gives_the_vocabulary_sample_from_random_runs(tmp_path, monkeypatch):
    # A share of RUNS_FROM pairs or more from a larger plain corpus reads only enough runs of
    # 1,000 lines to hold it (here 2 of 3), then draws the share from them.
    monkeypatch.setattr(mix_module, "RUNS_FROM", 1000)
    specs = [write_corpus(tmp_path / "a", tagged("a", 3000)),
             write_corpus(tmp_path / "b", tagged("b", 300))]  # fmt: skip
    mix = Mix.load(DataConfig(dataset=specs))
    assert mix.sample_sizes(1500) == [1364, 136]
    sample = [source.decode() for source, _ in mix.sample(1500, seed=0).as_numpy_iterator()]
    a_numbers = [int(source.split()[1]) for source in sample if source.startswith("a")]
    assert len({number // 1000 for number in a_numbers}) == 2
    assert abs(len(a_numbers) - 1364) <= 3 * 1364**0.5 and len(set(a_numbers)) == len(a_numbers)
    b_numbers = [int(source.split()[1]) for source in sample if source.startswith("b")]
    assert abs(len(b_numbers) - 136) <= 3 * 136**0.5 and max(b_numbers) > 200  # all of b read
    assert sample == [s.decode() for s, _ in mix.sample(1500, seed=0).as_numpy_iterator()]
