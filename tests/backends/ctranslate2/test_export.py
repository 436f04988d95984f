import types

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.backends.ctranslate2.export import export_ctranslate2
from tf_transformer.config import get_preset
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.model import Transformer
from tf_transformer.text.special_tokens import END_ID, RESERVED_TOKENS

pytestmark = pytest.mark.cost(30)  # seconds in make test (measured)

ctranslate2 = pytest.importorskip("ctranslate2")

MAX_LENGTH = 12


def synthetic_tokenizers(source_size, target_size):
    """Stand-ins with the `.vocab`, `.lower_case` and `.languages` of real tokenizers."""

    def tokenizer(prefix, size):
        tokens = list(RESERVED_TOKENS) + [f"{prefix}{i}" for i in range(len(RESERVED_TOKENS), size)]
        return types.SimpleNamespace(vocab=tf.Variable(tokens), lower_case=tf.constant(False))

    return types.SimpleNamespace(
        source=tokenizer("s", source_size),
        target=tokenizer("t", target_size),
        languages=tf.constant(["pt", "en"]),
    )


def our_tokens(ids, vocab):
    """Greedy output ids (START first) -> the tokens CTranslate2 returns (no START, no END)."""
    tokens = []
    for token_id in ids[1:]:
        if token_id == END_ID:
            break
        tokens.append(vocab[token_id])
    return tokens


def ct2_greedy(model_dir, sources):
    translator = ctranslate2.Translator(str(model_dir), device="cpu", intra_threads=1)
    results = translator.translate_batch(
        sources,
        beam_size=1,
        max_decoding_length=MAX_LENGTH,
        suppress_sequences=[["[PAD]"]],  # as ours: live sequences never emit PAD
    )
    return [result.hypotheses[0] for result in results]


def assert_same_greedy(model, source_vocab, target_vocab, model_dir, sources):
    ids = [[source_vocab.index(token) for token in sentence] for sentence in sources]
    width = max(len(sentence) for sentence in ids) + 2
    src = np.zeros((len(ids), width), np.int64)
    for row, sentence in enumerate(ids):
        src[row, : len(sentence) + 2] = [2, *sentence, 3]  # START ... END, as ct2 adds them
    ours = make_decode_fn(model, max_new_tokens=MAX_LENGTH)(tf.constant(src)).ids.numpy()
    expected = [our_tokens(row, target_vocab) for row in ours]
    assert ct2_greedy(model_dir, sources) == expected


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"norm_first": True},
        {"share_target_embeddings": True, "positional_layout": "concat"},
        {"norm_first": True, "share_target_embeddings": True},
        {"share_embeddings": True, "target_vocab_size": 40},
        {"activation": "gelu"},
    ],
    ids=["post-norm", "pre-norm", "tied-concat", "pre-norm-tied", "shared", "gelu"],
)
def test_ctranslate2_greedy_ids_equal_ours(tmp_path, changes):
    sizes = {"num_layers": 2, "input_vocab_size": 40, "target_vocab_size": 50}
    config = get_preset("tiny").replace(**{**sizes, **changes})
    tf.keras.utils.set_random_seed(1)
    model = Transformer.from_config(config)
    model.build()
    tokenizers = synthetic_tokenizers(config.input_vocab_size, config.target_vocab_size)
    path = export_ctranslate2((model, tokenizers), tmp_path / "ct2")
    assert {"model.bin", "config.json"} <= {p.name for p in path.iterdir()}
    source_vocab = [t.decode() for t in tokenizers.source.vocab.numpy()]
    target_vocab = [t.decode() for t in tokenizers.target.vocab.numpy()]
    sources = [["s5", "s9", "s17", "s30"], ["s11"], ["s4", "s4", "s39", "s20", "s6", "s7", "s8"]]
    assert_same_greedy(model, source_vocab, target_vocab, path, sources)


def test_run_dir_export_translates_like_the_run_and_is_never_overwritten(tmp_path):
    from tests.export_helpers import tiny_objects

    run, tokenizers, model = tiny_objects()
    path = export_ctranslate2(run.root, tmp_path / "ct2")
    sentences = ["o gato está na mesa .", "eu gosto de livros ."]
    pieces = tokenizers.source.lookup(tokenizers.source.tokenize(sentences))[:, 1:-1]
    sources = [[t.decode() for t in row] for row in pieces.to_list()]
    source_vocab = [t.decode() for t in tokenizers.source.vocab.numpy()]
    target_vocab = [t.decode() for t in tokenizers.target.vocab.numpy()]
    assert_same_greedy(model, source_vocab, target_vocab, path, sources)
    before = sorted(p.name for p in path.iterdir())
    with pytest.raises(FileExistsError):
        export_ctranslate2(run.root, path)
    assert sorted(p.name for p in path.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_vocabulary_that_does_not_fit_the_model_is_refused(tmp_path):
    model = Transformer.from_config(
        get_preset("tiny").replace(input_vocab_size=40, target_vocab_size=50)
    )
    with pytest.raises(ValueError, match="target vocabulary"):
        export_ctranslate2((model, synthetic_tokenizers(40, 49)), tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()


@pytest.mark.slow
def test_cli_export_format_ctranslate2_writes_a_loadable_model(tmp_path, capsys):
    from tests.export_helpers import tiny_run_dir
    from tf_transformer.cli import main

    out = tmp_path / "ct2"
    assert (
        main(["export", str(tiny_run_dir().root), "--format", "ctranslate2", "--out", str(out)])
        == 0
    )
    assert f"Exported ctranslate2 to {out}" in capsys.readouterr().out
    assert {"model.bin", "config.json"} <= {p.name for p in out.iterdir()}
    translator = ctranslate2.Translator(str(out), device="cpu")
    assert translator.translate_batch([["[UNK]"]], beam_size=1, max_decoding_length=4)
    # Never overwritten; SavedModel options are refused.
    assert (
        main(["export", str(tiny_run_dir().root), "--format", "ctranslate2", "--out", str(out)])
        == 2
    )
    assert "never overwritten" in capsys.readouterr().err
    assert main(["export", "x", "--format", "ctranslate2", "--jit-compile", "--version", "2"]) == 2
    assert "--jit-compile, --version: not for --format ctranslate2" in capsys.readouterr().err
