"""Open a translator from a run directory or from an exported SavedModel, behind one function."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

TranslateFn = Callable[[list[str]], list[str]]


def saved_model_version(path: str | Path) -> Path | None:
    """The SavedModel directory at `path`: itself, or its highest numbered version (TF Serving's
    base-path layout); None when `path` holds no SavedModel."""
    path = Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    versions = [p.parent for p in path.glob("*/saved_model.pb") if p.parent.name.isdigit()]
    return max(versions, key=lambda p: int(p.name)) if versions else None


def load_translate_fn(
    path: str | Path,
    *,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_length: int | None = None,
    checkpoint: str | None = None,
) -> tuple[TranslateFn, str]:
    """A `list[str] -> list[str]` translator and a one-line description of what it runs.

    Args:
      path: a run directory (config.json, tokenizers/, checkpoints/) or an exported SavedModel
        (a version directory or a base path of numbered versions: the highest is used).
      beam_size: 1 for greedy decoding. A SavedModel decodes as it was exported: 1 picks its
        `greedy` signature, anything else `serving_default` with the export's beam size.
      length_penalty, max_length, checkpoint: for a run directory (see `Translator`,
        `RunDir.checkpoint`: by default the best checkpoint, else the averaged one, else the
        latest; the description names it); a SavedModel has them baked in.

    Raises:
      FileNotFoundError: `path` is neither.
      ValueError: a bad beam size.
    """
    if beam_size < 1:
        raise ValueError(f"beam size must be at least 1, got {beam_size}.")
    path = Path(path)
    version_dir = saved_model_version(path)
    if version_dir is not None:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        name = "greedy" if beam_size == 1 else "serving_default"
        signature = tf.saved_model.load(str(version_dir)).signatures[name]

        def translate(sentences: list[str]) -> list[str]:
            if not sentences:
                return []
            out = signature(sentences=tf.constant(sentences, tf.string))["translations"]
            return [text.decode("utf-8") for text in out.numpy()]

        return translate, f"SavedModel {version_dir} (signature {name})"

    from tf_transformer.run_dir import RunDir

    run = RunDir(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is neither a run directory nor an exported SavedModel.")
    run.read_config()  # a clear error before TensorFlow loads anything
    from tf_transformer.inference.translator import Translator

    tokenizers = run.load_tokenizers()
    which, checkpoint = run.checkpoint(checkpoint)
    translator = Translator(
        tokenizers,
        run.load_model(checkpoint),
        max_length=max_length,
        beam_size=beam_size,
        alpha=length_penalty,
    )
    mode = "greedy" if beam_size == 1 else f"beam {beam_size}, alpha {length_penalty}"
    return translator.translate_batch, f"run {path} ({which} checkpoint {checkpoint}, {mode})"
