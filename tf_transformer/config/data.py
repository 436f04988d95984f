"""`DataConfig`: which corpus, and its language pair."""

from __future__ import annotations

import dataclasses

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.config.base import _DictConfig, setting

# Data specs that are names, not paths (see `tf_transformer.data.load_dataset`).
NAMED_DATASETS = ("sample", "sample_written", "ted_hrlr", "ted_hrlr_translate/pt_to_en")
_PATH_FIELDS = ("dataset", "tarball", "data_dir")


@dataclasses.dataclass(frozen=True)
class DataConfig(_DictConfig):
    """Which corpus to train on, and its language pair (source -> target)."""

    dataset: str = setting(
        "sample", "sample (lower case) | sample_written (cased) | ted_hrlr | a directory | a .tsv"
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

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("source_lang", "target_lang"):
            code = getattr(self, name)
            if not code or not code.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"{name} must be a language code such as 'pt', got {code!r}.")
        if self.source_lang == self.target_lang:
            raise ValueError(f"source and target language are both {self.source_lang!r}.")

    def recorded(self) -> Self:
        """As config.json records it: local paths made absolute (names and URLs unchanged), so
        a run resumed or evaluated from another working directory finds its data."""
        from pathlib import Path

        def absolute(spec: str | None) -> str | None:
            if spec is None or spec in NAMED_DATASETS or "://" in spec:
                return spec
            path = Path(spec).expanduser()
            return str(path.resolve()) if path.exists() else spec

        return self.replace(**{name: absolute(getattr(self, name)) for name in _PATH_FIELDS})

    def load(self, split: str):
        """One split as `(source, target)` string pairs (see `tf_transformer.data.load_dataset`)."""
        from tf_transformer.data import load_dataset

        return load_dataset(
            self.dataset,
            split,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            tarball=self.tarball,
            data_dir=self.data_dir,
        )
