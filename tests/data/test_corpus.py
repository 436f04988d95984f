"""Corpora streamed from their files: the pairs the files hold, in order or one shuffled pass
per seed (every pair once), never a constant in the graph; a bad line in a shard."""

import collections
import gzip
import itertools

import pytest
import tensorflow as tf

from tf_transformer.data import DataFormatError, load_dataset
from tf_transformer.data.corpus import CYCLE, FileCorpus, window_shuffle
from tf_transformer.data.mix import read_runs
from tf_transformer.data.sources import load_corpus
from tf_transformer.data.text_files import checked_files, read_text_dir

PAIRS = [(f"frase {i} número {i % 7}", f"sentence {i} number {i % 7}") for i in range(230)]


def _write(path, lines):
    data = "".join(f"{line}\n" for line in lines).encode("utf-8")
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)


def _read(path) -> list[str]:
    """A file's lines as Python reads them (the reference the stream must equal)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return handle.read().decode("utf-8").splitlines()


def write_shards(directory, pairs, *, layout: str):
    """`pairs` as the train split of `directory`: one file pair, shards (some gzip), or TSV
    shards; returns the pairs read back from the files with Python."""
    directory.mkdir(parents=True, exist_ok=True)
    if layout in ("one file", "one gzip file"):
        target = directory / ("train.en.gz" if layout == "one gzip file" else "train.en")
        _write(directory / "train.pt", [p for p, _ in pairs])
        _write(target, [e for _, e in pairs])
        return list(zip(_read(directory / "train.pt"), _read(target)))
    cuts = [0, 100, 101, 180, len(pairs)]  # shards of 100, 1, 79 and 50 pairs
    read = []
    for shard, (start, end) in enumerate(itertools.pairwise(cuts)):
        part, gz = pairs[start:end], ".gz" if shard % 2 and "plain" not in layout else ""
        if "tsv" in layout:
            path = directory / f"train.{shard:02d}.tsv{gz}"
            _write(path, [f"{p}\t{e}" for p, e in part])
            read += [tuple(line.split("\t")) for line in _read(path)]
        else:
            source, target = (
                directory / f"train.{shard:02d}.pt{gz}",
                directory / f"train.{shard:02d}.en",
            )
            _write(source, [p for p, _ in part])
            _write(target, [e for _, e in part])
            read += list(zip(_read(source), _read(target)))
    return read


def _listed(dataset) -> list[tuple[str, str]]:
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


# Plain files are read in pieces from byte offsets; a corpus with a gzip file, shard by shard.
LAYOUTS = ["one file", "one gzip file", "plain shards", "shards", "plain tsv shards", "tsv shards"]
GZIP_LAYOUTS = ("one gzip file", "shards", "tsv shards")


def pieces_of(directory, piece_lines: int) -> FileCorpus:
    """The train split of `directory`, read in pieces of `piece_lines` lines (marks every 5)
    where it can be."""
    files = read_text_dir(directory, "train")
    marked = checked_files(files.sources, files.targets, mark_lines=5)
    return FileCorpus(marked, piece_lines=piece_lines)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_streaming_gives_the_pairs_the_files_hold(tmp_path, layout):
    from_files = write_shards(tmp_path, PAIRS, layout=layout)
    assert from_files == PAIRS  # the reference reads what was written
    assert _listed(load_dataset(tmp_path, "train")) == from_files
    assert load_corpus(tmp_path, "train").size == len(PAIRS)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_shuffled_pass_holds_every_pair_once_in_its_seeds_order(tmp_path, layout):
    write_shards(tmp_path, PAIRS, layout=layout)
    corpus = pieces_of(tmp_path, piece_lines=15)
    assert (corpus.files.marks is None) == (layout in GZIP_LAYOUTS)
    passes = {seed: _listed(corpus.shuffled([seed, 0], shuffle_buffer=32)) for seed in (0, 1)}
    for listed in passes.values():
        assert collections.Counter(listed) == collections.Counter(PAIRS)  # each pair once
        assert listed != PAIRS
    assert passes[0] != passes[1]
    assert _listed(corpus.shuffled(tf.constant([1, 0]), shuffle_buffer=32)) == passes[1]


@pytest.mark.parametrize("layout", ["one file", "plain tsv shards"])
def test_a_plain_corpus_is_read_in_pieces_from_anywhere_in_its_files(tmp_path, layout):
    # Without a shuffle window, a pass reads CYCLE pieces at once: its first pairs come from
    # pieces far apart, and each piece's pairs in file order.
    write_shards(tmp_path, PAIRS, layout=layout)
    corpus = pieces_of(tmp_path, piece_lines=10)
    numbers = [int(s.split()[1]) for s, _ in _listed(corpus.shuffled([0, 0], shuffle_buffer=1))]
    assert sorted(numbers) == list(range(len(PAIRS)))
    first = sorted(numbers[:CYCLE])
    assert first[-1] - first[0] > len(PAIRS) // 2
    if layout == "one file":  # pieces of 10 lines (the shards cut some shorter)
        assert numbers[CYCLE] == numbers[0] + 1  # the first piece's next line
    assert numbers != sorted(numbers)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_two_workers_split_a_pass_by_piece_each_pair_once(tmp_path, layout):
    write_shards(tmp_path, PAIRS, layout=layout)
    corpus = pieces_of(tmp_path, piece_lines=15)  # plain: 16-18 pieces; with gzip: 4 shards
    parts = [_listed(corpus.shuffled([2, 0], shuffle_buffer=32, shard=(i, 2))) for i in (0, 1)]
    assert collections.Counter(parts[0] + parts[1]) == collections.Counter(PAIRS)
    assert 0.2 < len(parts[0]) / len(PAIRS) < 0.8  # both read a part, neither the whole
    if layout == "one file":  # pieces of 15 lines: worker i reads pieces i, i + 2, ...
        for index, part in enumerate(parts):
            pieces = {int(source.split()[1]) // 15 % 2 for source, _ in part}
            assert pieces == {index}
    one = _listed(corpus.shuffled([2, 0], shuffle_buffer=32))
    # By piece where there are pieces enough (a single gzip file is one: by line).
    assert (parts[0] == one[0::2]) == (corpus.piece_count() < 2)


def test_fewer_pieces_than_workers_are_split_by_line(tmp_path):
    write_shards(tmp_path, PAIRS, layout="one gzip file")  # one piece
    corpus = pieces_of(tmp_path, piece_lines=15)
    assert corpus.piece_count() == 1
    one = _listed(corpus.shuffled([2, 0], shuffle_buffer=32))
    parts = [_listed(corpus.shuffled([2, 0], shuffle_buffer=32, shard=(i, 3))) for i in range(3)]
    assert parts == [one[0::3], one[1::3], one[2::3]]


def test_a_window_shuffle_keeps_each_pair_in_its_window():
    pairs = tf.data.Dataset.range(100).map(
        lambda i: (tf.strings.as_string(i), tf.strings.as_string(i))
    )
    order = [int(s) for s, _ in window_shuffle(pairs, 10, [3, 4]).as_numpy_iterator()]
    assert order != list(range(100))
    for start in range(0, 100, 10):
        assert sorted(order[start : start + 10]) == list(range(start, start + 10))


def test_the_corpus_is_never_a_constant_of_the_graph(tmp_path):
    write_shards(tmp_path, PAIRS, layout="shards")
    corpus = load_corpus(tmp_path, "train")
    for dataset in (corpus.pairs(), corpus.shuffled([0, 0], shuffle_buffer=32)):
        graph = dataset._as_serialized_graph().numpy()
        assert b"train.00.pt" in graph  # the file names are in it
        assert b"frase 5 " not in graph and b"sentence 5 " not in graph  # the text is not


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("bad utf-8", r"train.03.pt.gz: line 7 is not valid UTF-8"),
        ("empty line", r"train.01.en: line 1 is empty"),
        ("misaligned", r"misaligned files: .*train.02.pt has 79 lines but .*train.02.en has 78"),
        ("no partner", r"train.04.pt has no en file beside it"),
    ],
)
def test_a_bad_shard_is_named_with_its_line_before_any_pair_is_read(tmp_path, change, message):
    write_shards(tmp_path, PAIRS, layout="shards")
    if change == "bad utf-8":
        with gzip.open(tmp_path / "train.03.pt.gz", "rb") as handle:
            lines = handle.read().split(b"\n")
        lines[6] = b"caf\xe9"  # Latin-1
        with gzip.open(tmp_path / "train.03.pt.gz", "wb") as handle:
            handle.write(b"\n".join(lines))
    elif change == "empty line":
        _write(tmp_path / "train.01.en", [""])
    elif change == "misaligned":
        _write(tmp_path / "train.02.en", [e for _, e in PAIRS[101:179]])
    else:
        _write(tmp_path / "train.04.pt", ["só"])
    with pytest.raises(DataFormatError, match=message):
        load_corpus(tmp_path, "train")


@pytest.mark.parametrize("layout", ["one file", "plain shards", "plain tsv shards"])
def test_runs_are_whole_runs_of_lines_at_random_marks_in_file_order(tmp_path, layout):
    from_files = write_shards(tmp_path, PAIRS, layout=layout)
    corpus = pieces_of(tmp_path, piece_lines=15)  # marks every 5 lines of each shard
    cuts = [0, len(PAIRS)] if layout == "one file" else [0, 100, 101, 180, len(PAIRS)]
    runs = [
        frozenset(range(first, min(first + 5, end)))
        for start, end in itertools.pairwise(cuts)
        for first in range(start, end, 5)
    ]
    pairs, count = read_runs(corpus.files, 42, seed=0)
    sample = _listed(pairs)
    assert len(sample) == count and set(sample) <= set(from_files)  # aligned, as the files hold
    numbers = [int(source.split()[1]) for source, _ in sample]
    assert numbers == sorted(numbers)  # file order
    chosen = [run for run in runs if run & set(numbers)]
    assert len(chosen) == 9 and set(numbers) == frozenset.union(*chosen)  # ceil(42 / 5) whole runs
    assert _listed(read_runs(corpus.files, 42, seed=0)[0]) == sample
    assert _listed(read_runs(corpus.files, 42, seed=1)[0]) != sample
