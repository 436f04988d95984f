"""The named dev sets a run validates on (`DataConfig.dev_set`)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tf_transformer.data.errors import DataFormatError
from tf_transformer.data.mix import unique_names
from tf_transformer.data.sources import SAMPLE_SPECS, TED_SPECS
from tf_transformer.data.text_files import SPLIT_STEMS, text_dir_splits


def has_dev_split(spec: str, source_lang: str, target_lang: str) -> bool:
    """Whether a corpus holds a dev split: the built-in corpora do; a directory does when it
    has dev/val/validation files; a single .tsv file has no splits."""
    if spec in (*SAMPLE_SPECS, *TED_SPECS):
        return True
    directory = Path(spec).expanduser()
    if not directory.is_dir():
        return False
    splits = text_dir_splits(directory, source_lang, target_lang)
    return any(stem in splits for stem in SPLIT_STEMS["validation"])


def load_dev_sets(data) -> dict[str, tf.data.Dataset]:
    """The dev split of each of `data.dev_set`, by name, in order (the first is the one that
    picks the best checkpoint). Without `dev_set`: one corpus's own dev split (as with a
    single corpus always), or for a mix, that of each corpus that has one.

    Raises:
      DataFormatError: a dev set is missing or misaligned, or no corpus of a mix has a dev
        split (the message says to name one).
    """
    specs = list(data.dev_set)
    if not specs:
        if not data.is_mix:
            specs = [data.dataset[0]]
        else:
            specs = [
                spec
                for spec in data.dataset
                if has_dev_split(spec, data.source_lang, data.target_lang)
            ]
        if not specs:
            raise DataFormatError(
                f"none of the corpora ({', '.join(data.dataset)}) has a dev split: name a dev "
                "set with --dev-set SPEC."
            )
    names = unique_names(specs)
    return {name: data.load("validation", spec) for name, spec in zip(names, specs)}
