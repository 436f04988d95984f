"""Sentence-initial truecasing of the target (`TrainConfig.truecase_target`): which words are
lowered, the graph ops that lower and capitalise, and the tokenizers that use them."""

import pytest
import tensorflow as tf

from tf_transformer.cli import build_parser
from tf_transformer.commands.train import configs_from_args
from tf_transformer.config import TrainConfig
from tf_transformer.text.tokenizers import UNK_ID, build_tokenizers, load_tokenizers
from tf_transformer.text.truecase import (
    FirstWordTruecaser,
    capitalize_first_letter,
    learn_first_words,
)

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)

ENGLISH = [
    "The car is new.",
    "I think the car is red.",
    "He is here, and he is tired.",
    "Tom saw the car; Tom ran.",
    "I saw Tom.",
    '"Do you know?" he said. "I do."',
    "3 dogs ran after the car.",
    "¿Who?",
]


def _texts(tensor: tf.Tensor) -> list[str]:
    return [text.decode("utf-8") for text in tensor.numpy()]


def test_learn_first_words_lowers_what_is_mostly_lower_case_inside_sentences():
    # "The": "the" inside 4 times, "The" never; "He": "he" twice; "Do": "do" once, "Do" never.
    # "I" (inside: "I" twice, "i" never) and "Tom" (inside: "Tom" twice) keep their capital;
    # "Who" is not lowered ("who" never inside); "3 dogs" has no first word.
    assert learn_first_words(ENGLISH) == ["Do", "He", "The"]
    assert learn_first_words(["The cat.", "The dog."]) == []  # "the" never inside
    assert learn_first_words(["", "...", "42"]) == []


def test_lower_first_word_lowers_only_listed_first_words():
    truecaser = FirstWordTruecaser(["The", "Do", "Éramos"])
    given = [
        "The car is new.",
        '"Do you know?" he said.',
        "Tom saw The Beatles.",  # not a listed first word: as is
        "Theater is fun.",  # a different word
        "I do.",
        "3 dogs.",
        "",
        "Éramos felizes.",
    ]
    assert _texts(truecaser.lower_first_word(tf.constant(given))) == [
        "the car is new.",
        '"do you know?" he said.',
        "Tom saw The Beatles.",
        "Theater is fun.",
        "I do.",
        "3 dogs.",
        "",
        "éramos felizes.",
    ]
    assert _texts(FirstWordTruecaser([]).lower_first_word(tf.constant(given))) == given


def test_capitalize_first_letter_after_leading_marks_only():
    given = ["the car.", '"yes," he said', "¿qué?", "ágil", "3 dogs", "", "...", "I am", "a"]
    assert _texts(capitalize_first_letter(tf.constant(given))) == [
        "The car.", '"Yes," he said', "¿Qué?", "Ágil", "3 dogs", "", "...", "I am", "A",
    ]  # fmt: skip


def _tokenizers(truecase: bool):
    portuguese = ["o carro"] * len(ENGLISH)
    pairs = tf.data.Dataset.from_tensor_slices((portuguese, ENGLISH))
    return build_tokenizers(
        pairs, vocab_size=300, learn_params={"lower_thresh": 1}, truecase_target=truecase
    )


def test_truecasing_tokenizers_share_ids_and_capitalise_and_survive_a_save(tmp_path):
    tokenizers = _tokenizers(truecase=True)
    vocab = set(_texts(tokenizers.target.vocab))
    assert {"the", "he", "do", "I", "Tom"} <= vocab and not {"The", "He"} & vocab
    ids = tokenizers.target.tokenize(tf.constant(["The car is new.", "the car is new."]))
    assert ids[0].numpy().tolist() == ids[1].numpy().tolist()
    assert UNK_ID not in ids[0].numpy().tolist()
    texts = ["The car is new.", "I saw Tom.", '"Do you know?" he said.', "3 dogs ran."]
    ids = tokenizers.target.tokenize(tf.constant(texts))
    assert _texts(tokenizers.target.detokenize(ids)) == texts
    # The source side is untouched: "o" stays as written.
    assert tokenizers.source.truecaser is None
    tokenizers.save(tmp_path / "tokenizers")
    loaded = load_tokenizers(tmp_path / "tokenizers")
    assert _texts(loaded.target.detokenize(loaded.target.tokenize(tf.constant(texts)))) == texts
    lowered = loaded.target.tokenize(tf.constant(["The car is new."])).to_list()
    assert lowered == tokenizers.target.tokenize(tf.constant(["the car is new."])).to_list()


def test_without_truecasing_case_is_kept_as_learnt():
    tokenizers = _tokenizers(truecase=False)
    assert tokenizers.target.truecaser is None
    assert "The" in set(_texts(tokenizers.target.vocab))
    ids = tokenizers.target.tokenize(tf.constant(["the car is new."]))
    assert _texts(tokenizers.target.detokenize(ids)) == ["the car is new."]


def test_truecase_target_flag_and_default():
    assert TrainConfig().truecase_target is False
    given = ["train", "--preset", "tiny", "--truecase-target"]
    _, train_config = configs_from_args(build_parser().parse_args(given))
    assert train_config.truecase_target is True
    config = TrainConfig.from_dict(TrainConfig(truecase_target=True).to_dict())
    assert config.truecase_target is True
