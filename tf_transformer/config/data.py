"""`DataConfig`: which corpus (or mix of corpora, with weights), its dev sets, its language pair."""

from __future__ import annotations

import dataclasses

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.config.base import _DictConfig, setting
from tf_transformer.errors import InvalidValueError

# Data specs that are names, not paths (see `tf_transformer.data.load_dataset`).
NAMED_DATASETS = ("sample", "sample_written", "ted_hrlr", "ted_hrlr_translate/pt_to_en")
_PATH_FIELDS = ("dataset", "dev_set", "tarball", "data_dir")


@dataclasses.dataclass(frozen=True)
class DataConfig(_DictConfig):
    """Which corpus (or corpora) to train on, validated on what, and the language pair.

    `dataset` holds one data spec or several: several are mixed by sampling each pair from
    corpus i with probability `dataset_weights[i]` (default: proportional to the corpora's
    sizes; see `tf_transformer.data.mix`). A single string is read as a one-corpus mix.
    `dev_set` names the dev sets validation scores (the first one picks the best checkpoint);
    empty means the dev split of each training corpus that has one.
    """

    dataset: tuple[str, ...] = setting(
        ("sample",),
        "sample (lower case) | sample_written (cased) | ted_hrlr | a directory | a .tsv; "
        "repeat the flag to train on several corpora at once",
        repeatable=True,
        metavar="SPEC",
    )
    dataset_weights: tuple[float, ...] | None = setting(
        None,
        "Sampling weights of the --dataset corpora, in their order (normalised to sum to 1)",
        unset="proportional to size",
        metavar="W1,W2,...",
    )
    dev_set: tuple[str, ...] = setting(
        (),
        "A dev set to validate on (a data spec; its dev split is read), repeatable; the first "
        "one picks the best checkpoint and gives the validation loss",
        repeatable=True,
        unset="the dev split of each --dataset corpus that has one",
        metavar="SPEC",
    )
    source_lang: str = setting(
        "pt",
        "Source language code: text files are read as train.CODE; the built-in corpora "
        "(sample, ted_hrlr) are pt-en and also serve en->pt.",
        metavar="CODE",
    )
    target_lang: str = setting("en", "Target language code.", metavar="CODE")
    tarball: str | None = setting(
        None, "ted_hrlr: a local copy (or mirror URL) of the TED tarball."
    )
    data_dir: str | None = setting(None, "ted_hrlr: the TFDS data directory.")
    corpus_shuffle_buffer: int = setting(
        100_000,
        "Pairs each training corpus is shuffled in as it streams from its files: memory grows "
        "with N (about 200 bytes a pair), the order's randomness too (see docs/data.md).",
        positive=True,
        metavar="N",
    )

    def __post_init__(self) -> None:
        for name in ("dataset", "dev_set"):  # one spec, or a list read from config.json
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        if self.dataset_weights is not None:
            object.__setattr__(
                self, "dataset_weights", tuple(float(w) for w in self.dataset_weights)
            )
        super().__post_init__()
        if not self.dataset:
            raise InvalidValueError("dataset names no corpus: give at least one data spec.")
        if self.dataset_weights is not None:
            if len(self.dataset_weights) != len(self.dataset):
                raise InvalidValueError(
                    f"dataset_weights has {len(self.dataset_weights)} weights for "
                    f"{len(self.dataset)} corpora: give one weight per --dataset, in order."
                )
            if any(not w >= 0 for w in self.dataset_weights) or not sum(self.dataset_weights):
                raise InvalidValueError(
                    f"dataset_weights must be non-negative with a positive sum, got "
                    f"{','.join(map(str, self.dataset_weights))}."
                )
        for name in ("source_lang", "target_lang"):
            code = getattr(self, name)
            if not code or not code.replace("-", "").replace("_", "").isalnum():
                raise InvalidValueError(
                    f"{name} must be a language code such as 'pt', got {code!r}."
                )
        if self.source_lang == self.target_lang:
            raise InvalidValueError(f"source and target language are both {self.source_lang!r}.")

    def recorded(self) -> Self:
        """As config.json records it: local paths made absolute (names and URLs unchanged), so
        a run resumed or evaluated from another working directory finds its data."""
        from pathlib import Path

        def absolute(spec: str | None) -> str | None:
            if spec is None or spec in NAMED_DATASETS or "://" in spec:
                return spec
            path = Path(spec).expanduser()
            return str(path.resolve()) if path.exists() else spec

        def recorded(name: str):
            value = getattr(self, name)
            return tuple(map(absolute, value)) if isinstance(value, tuple) else absolute(value)

        return self.replace(**{name: recorded(name) for name in _PATH_FIELDS})

    @property
    def is_mix(self) -> bool:
        """Whether the run trains on several corpora at once."""
        return len(self.dataset) > 1

    def load(self, split: str, spec: str | None = None):
        """One split of `spec` (default: the first corpus) as `(source, target)` string pairs
        in file order (see `tf_transformer.data.load_dataset`); the mix is
        `tf_transformer.data.mix.Mix`."""
        return self.corpus(split, spec).pairs()

    def corpus(self, split: str, spec: str | None = None):
        """One split of `spec` (default: the first corpus), checked, to stream (see
        `tf_transformer.data.sources.load_corpus`)."""
        from tf_transformer.data.sources import load_corpus

        return load_corpus(
            self.dataset[0] if spec is None else spec,
            split,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            tarball=self.tarball,
            data_dir=self.data_dir,
        )
