"""One tiny run directory and one export of it, built once per test session and shared.

Export and SavedModel loading take seconds each, so the export tests, the serving tests and the
CLI tests share these (built on first use, in a temporary directory removed at exit).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

from tf_transformer.config import DecodeConfig, get_preset
from tf_transformer.data.sample import sample_pairs
from tf_transformer.model import Transformer
from tf_transformer.run_dir import RunDir
from tf_transformer.text.tokenizers import build_tokenizers

MAX_LENGTH = 8  # generated tokens: short, so beam search over untrained weights stays fast
BEAM_SIZE = 3
# The decoding both exports bake in.
DECODING = DecodeConfig(
    beam_size=BEAM_SIZE, max_source_tokens=MAX_LENGTH, max_new_tokens=MAX_LENGTH
)
XLA_WARMUP_BATCH_SIZES = (1, 2)
SENTENCES = [
    "o gato está na mesa .",
    "eu gosto de livros .",
    "as crianças não estavam no parque ?",
    "ela comprou um carro novo .",
    "nós vamos à praia amanhã .",
]


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="tf_transformer_export_tests_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@functools.cache
def tiny_objects():
    """`(run_dir, tokenizers, model)`: tokenizers (vocab ≤ 300) and a tiny untrained model,
    saved as a run directory (config.json, tokenizers/, one checkpoint)."""
    pairs = sample_pairs("train", size=300)
    ds = tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))
    run = RunDir(_root() / "run")
    tokenizers = build_tokenizers(
        ds, vocab_size=300, vocab_dir=_root() / "vocab", learn_params={"num_iterations": 1}
    )
    config = get_preset("tiny").replace(
        input_vocab_size=int(tokenizers.source.get_vocab_size()),
        target_vocab_size=int(tokenizers.target.get_vocab_size()),
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_config(config)
    model.build()
    run.write_config({"model": config.to_dict()})
    tokenizers.save(run.tokenizers_path)
    try:  # every weight, by path (Keras 3 list-held layers escape tf.train.Checkpoint(model=))
        from tf_transformer.weights import model_checkpoint
    except ImportError:
        model_checkpoint = tf.train.Checkpoint
    manager = tf.train.CheckpointManager(
        model_checkpoint(model=model), str(run.checkpoints_path), max_to_keep=1
    )
    manager.save()
    return run, tokenizers, model


def tiny_run_dir() -> RunDir:
    """The run directory of `tiny_objects()`."""
    return tiny_objects()[0]


@functools.cache
def tiny_export():
    """`(path, module)`: `saved_models/tiny/1` and the `ExportModule` it was written from (beam 3,
    at most 8 tokens); `module.translator` is the in-process Translator."""
    from tf_transformer.backends.savedmodel.export import ExportModule

    _, tokenizers, model = tiny_objects()
    module = ExportModule(tokenizers, model, DECODING)
    return module.export(_root() / "saved_models" / "tiny"), module


@functools.cache
def tiny_xla_export():
    """`(path, module)`: `tiny_export()` again with `jit_compile=True` (`saved_models/tiny_xla/1`),
    its warm-up covering batches of 1 and 2 (one source bucket: `MAX_LENGTH` < 16)."""
    from tf_transformer.backends.savedmodel.export import ExportModule

    _, tokenizers, model = tiny_objects()
    module = ExportModule(
        tokenizers,
        model,
        DECODING,
        jit_compile=True,
        warmup_batch_sizes=XLA_WARMUP_BATCH_SIZES,
    )
    return module.export(_root() / "saved_models" / "tiny_xla"), module


@functools.cache
def loaded_export():
    """`tf.saved_model.load` of `tiny_export()`, shared (its signatures are thread-safe)."""
    return tf.saved_model.load(str(tiny_export()[0]))


TRAINED_STEPS = 100  # enough for different sentences to get different translations


@functools.cache
def trained_export() -> Path:
    """`saved_models/trained/1`: the tiny preset trained `TRAINED_STEPS` steps on the sample
    corpus by `train`, exported with `DECODING`. Unlike `tiny_export()`, distinct sentences
    get distinct translations (tests/test_serving_load.py asserts it)."""
    from tf_transformer import cli
    from tf_transformer.backends.savedmodel.export import export_run_dir

    run_dir = _root() / "trained"
    flags = ["--preset", "tiny", "--max-steps", str(TRAINED_STEPS), "--quiet"]
    assert cli.main(["train", *flags, "--run-dir", str(run_dir)]) == 0
    return export_run_dir(run_dir, _root() / "saved_models" / "trained", config=DECODING)
