"""What an export outside TensorFlow carries and checks: the tokenizers as plain files, and a
metadata file that lists every file with its size and SHA-256.

A runtime without TensorFlow (LiteRT, CTranslate2) tokenizes with `text.plain.PlainTokenizer`,
which reads a vocabulary file and two settings. `write_tokenizers` writes them at export (it
reads the TensorFlow tokenizers); `read_tokenizers` and `read_metadata` read them back without
TensorFlow, after checking that every listed file is whole: a torn copy is one error line that
names the file, never a wrong translation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from tf_transformer.backends.base import merge_decoding
from tf_transformer.config import DecodeConfig
from tf_transformer.errors import InvalidValueError, MissingFileError, UnreadableFileError
from tf_transformer.text.plain import PlainTokenizer

VOCAB_FILES = {"source": "source.vocab", "target": "target.vocab"}


def vocabulary(tokenizer) -> list[str]:
    """A TensorFlow tokenizer's vocabulary as a list of tokens (its ``vocab`` variable, id
    order)."""
    return [token.decode("utf-8") for token in tokenizer.vocab.numpy()]


def first_words(tokenizer) -> list[str] | None:
    """A TensorFlow tokenizer's truecasing words (None: it does not truecase), built or
    loaded."""
    import tensorflow as tf

    truecaser = getattr(tokenizer, "truecaser", None)
    if truecaser is None:
        return None
    table = getattr(truecaser, "table", None)
    if table is None:  # truecasing with no words to lower: capitalisation only
        return []
    keys, listed = tf.raw_ops.LookupTableExportV2(
        table_handle=table.resource_handle, Tkeys=tf.string, Tvalues=tf.bool
    )
    return sorted(k.decode("utf-8") for k, v in zip(keys.numpy(), listed.numpy()) if v)


def write_tokenizers(folder: Path, tokenizers) -> dict:
    """Writes `VOCAB_FILES` into `folder`; returns the metadata entries: the source and target
    tokenizers' vocabulary file, lower-casing and truecasing words, and the languages."""
    entries = {}
    for role, name in VOCAB_FILES.items():
        tokenizer = getattr(tokenizers, role)
        text = "".join(token + "\n" for token in vocabulary(tokenizer))
        (folder / name).write_text(text, encoding="utf-8")
        entries[role] = {
            "vocab": name,
            "lower_case": bool(tokenizer.lower_case.numpy()),
            "first_words": first_words(tokenizer),
        }
    languages = [t.decode("utf-8") for t in tokenizers.languages.numpy()]
    entries["languages"] = {"source": languages[0], "target": languages[1]}
    return entries


def read_tokenizers(folder: Path, metadata: dict) -> dict[str, PlainTokenizer]:
    """The source and target `PlainTokenizer`s of an export (`write_tokenizers`' entries)."""
    return {
        role: PlainTokenizer(
            (folder / metadata[role]["vocab"]).read_text(encoding="utf-8").splitlines(),
            lower_case=metadata[role]["lower_case"],
            first_words=metadata[role]["first_words"],
        )
        for role in VOCAB_FILES
    }


def file_entries(folder: Path, names: Iterable[str]) -> dict:
    """`{name: {"size", "sha256"}}` for the files `names` in `folder`."""
    entries = {}
    for name in names:
        data = (folder / name).read_bytes()
        entries[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return entries


def read_metadata(folder: Path, name: str, export_again: str) -> dict:
    """The metadata file `name` of an export, after checking that every file it lists
    (`"files"`, as `file_entries`) is whole.

    Args:
      export_again: the command that writes the export again, for the errors.

    Raises:
      InvalidValueError: the metadata is unreadable, or a file's size or SHA-256 differs.
      MissingFileError: a listed file is missing.
      UnreadableFileError: a file cannot be read (permission denied).
    """
    path = folder / name
    try:
        metadata = json.loads(read_file(path).decode("utf-8"))
        files = metadata["files"]
    except (ValueError, KeyError, TypeError) as error:  # not JSON, or not ours
        raise InvalidValueError(
            f"{path} is unreadable ({type(error).__name__}): export the run again ({export_again})."
        ) from None
    for file_name, expected in files.items():
        path = folder / file_name
        if not path.is_file():
            raise MissingFileError(
                f"{path} is missing: the export is incomplete; export the run again "
                f"({export_again})."
            )
        data = read_file(path)
        if len(data) != expected["size"] or hashlib.sha256(data).hexdigest() != expected["sha256"]:
            raise InvalidValueError(
                f"{path} is damaged ({len(data)} bytes, {expected['size']} written): copy it "
                f"again or export the run again ({export_again})."
            )
    return metadata


def open_export(
    folder: Path, name: str, export_again: str, request: DecodeConfig | None, where: str
) -> tuple[dict, DecodeConfig]:
    """An export's checked metadata (`read_metadata`) and the decoding a request runs on it:
    the defaults recorded at export (`"decoding"`), with what the request sets; the caps at
    most the export's (`base.merge_decoding`)."""
    metadata = read_metadata(folder, name, export_again)
    config = merge_decoding(
        where,
        DecodeConfig.from_dict(metadata["decoding"]),
        request or DecodeConfig(),
        capped=("max_source_tokens", "max_new_tokens"),
    )
    return metadata, config


def read_file(path: Path) -> bytes:
    """The bytes of `path`, or `UnreadableFileError` saying why not (permission denied)."""
    try:
        return path.read_bytes()
    except OSError as error:
        raise UnreadableFileError(
            f"cannot read {path}: {error.strerror or error}; give this user read access to the "
            "export's files."
        ) from error


def write_metadata(folder: Path, name: str, metadata: dict) -> None:
    """Writes the metadata file `name` (JSON) into `folder`."""
    (folder / name).write_text(json.dumps(metadata, indent=2) + "\n")
