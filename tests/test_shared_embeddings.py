"""A shared vocabulary with tied embeddings end to end: the runner, checkpoints, averaging, export.

The model and tokenizer halves are tested in test_model.py and test_tokenizers.py, the
CTranslate2 export in test_ctranslate2_export.py.
"""

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer import training
from tf_transformer.cli import main
from tf_transformer.config import DataConfig, DecodeConfig, TrainConfig, get_preset
from tf_transformer.data.sample import sample_pairs
from tf_transformer.run_dir import RunDir
from tf_transformer.text.tokenizers import RESERVED_TOKENS, Tokenizers, write_vocab
from tf_transformer.training.start.inputs import check_shared_embeddings

pytestmark = pytest.mark.cost(100)  # seconds in make test (measured)

SENTENCES = ["o gato está na mesa .", "eu gosto de livros ."]
MODEL = get_preset("tiny").replace(share_embeddings=True)
TRAIN = TrainConfig(
    epochs=None,
    max_steps=4,
    warmup_steps=10,
    vocab_size=400,
    shared_vocab=True,
    max_tokens=24,
    token_budget=256,
    checkpoint_every=2,
    average_last=2,
    log_every=2,
)


def _pairs(size: int) -> tf.data.Dataset:
    pairs = sample_pairs("train", size=size)
    return tf.data.Dataset.from_tensor_slices(([p for p, _ in pairs], [e for _, e in pairs]))


def _table(model) -> np.ndarray:
    return model.encoder.embedding.embedding.embeddings.numpy()


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    """`(RunDir, TrainResult)` of 4 steps with shared_vocab and share_embeddings."""
    run_dir = tmp_path_factory.mktemp("shared") / "run"
    tf.keras.utils.set_random_seed(0)
    pairs = _pairs(300)
    result = training.run(
        run_dir,
        DataConfig(),
        MODEL,
        TRAIN,
        train_pairs=pairs,
        validation_pairs=pairs.take(16),
        progress=False,
    )
    return RunDir(run_dir), result


@pytest.mark.slow
def test_the_runner_ties_the_embeddings_over_one_vocabulary(shared_run):
    run, result = shared_run
    tokenizers = run.load_tokenizers()
    vocab = tokenizers.source.vocab.numpy().tolist()
    assert tokenizers.target.vocab.numpy().tolist() == vocab
    config = run.model_config()
    assert config.share_embeddings and config.input_vocab_size == config.target_vocab_size
    assert config.input_vocab_size == len(vocab) and run.train_config().shared_vocab
    assert result.step == 4
    tables = [v for v in result.model.trainable_variables if "embedding" in v.path]
    assert len(tables) == 1


@pytest.mark.slow
def test_checkpoints_and_their_average_restore_the_one_matrix(shared_run):
    run, result = shared_run
    tokenizers = run.load_tokenizers()
    src = tokenizers.source.tokenize(tf.constant(SENTENCES)).to_tensor()
    tgt = tokenizers.target.tokenize(tf.constant(["the cat .", "i like books ."])).to_tensor()
    loaded = run.load_model("latest")
    np.testing.assert_array_equal(loaded((src, tgt)).numpy(), result.model((src, tgt)).numpy())
    last_two = [_table(run.load_model(f"{run.checkpoints_path}/ckpt-{s}")) for s in (2, 4)]
    assert not np.array_equal(*last_two)  # it trained: the average can fail
    averaged = run.load_model("averaged")
    np.testing.assert_allclose(_table(averaged), sum(last_two) / 2, rtol=1e-6, atol=1e-7)
    assert averaged.decoder.embedding.embedding.embeddings is (
        averaged.encoder.embedding.embedding.embeddings
    )


@pytest.mark.slow
def test_the_saved_model_export_decodes_like_the_translator(shared_run, tmp_path):
    from tf_transformer.backends.savedmodel.export import ExportModule

    run, _ = shared_run
    module = ExportModule(
        run.load_tokenizers(),
        run.load_model(),
        config=DecodeConfig(beam_size=3, max_source_tokens=8, max_new_tokens=8),
    )
    loaded = tf.saved_model.load(str(module.export(tmp_path / "export")))
    for signature, beam_size in (("serving_default", 3), ("greedy", 1)):
        out = loaded.signatures[signature](sentences=tf.constant(SENTENCES))
        expected = module.translator.translate(SENTENCES, config=DecodeConfig(beam_size=beam_size))
        assert out["tokens"].numpy().tolist() == expected["ids"].numpy().tolist()


def test_share_embeddings_without_a_shared_vocab_is_refused(tmp_path, capsys):
    refusal = r"shared_vocab \(--shared-vocab\), or untie them \(--no-share-embeddings\)\.$"
    with pytest.raises(ValueError, match=refusal):
        training.run(
            tmp_path / "run",
            DataConfig(),
            MODEL,
            TRAIN.replace(shared_vocab=False),
            train_pairs=_pairs(8),
            validation_pairs=_pairs(4),
            progress=False,
        )
    assert not (tmp_path / "run").exists()  # refused before anything is written
    code = main(["train", "--preset", "tiny", "--share-embeddings", "--run-dir", str(tmp_path)])
    assert code == 2 and "--shared-vocab" in capsys.readouterr().err
    # The way out the message names exists: small-data ties them, --no-share-embeddings unties.
    code = main(
        ["train", "--preset", "small-data", "--no-shared-vocab", "--run-dir", str(tmp_path)]
    )
    assert code == 2 and "--no-share-embeddings" in capsys.readouterr().err
    # Tokenizers of a run (e.g. reused ones) must have one vocabulary, not two.
    pt = write_vocab([*RESERVED_TOKENS, "olá", "."], tmp_path / "pt.vocab")
    en = write_vocab([*RESERVED_TOKENS, "hello", "."], tmp_path / "en.vocab")
    with pytest.raises(ValueError, match="tokenizers have two"):
        check_shared_embeddings(MODEL, Tokenizers(pt, en))
    check_shared_embeddings(MODEL, Tokenizers(pt, pt))
