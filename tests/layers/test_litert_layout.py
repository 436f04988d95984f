"""`LiteRTLayout` (the LiteRT export's step) decodes as recompute under XLA, where TensorFlow
runs its dynamic update slice; tests/inference/litert/test_litert.py checks the converted step."""

import numpy as np
import pytest
import tensorflow as tf

from tf_transformer.config import get_preset
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.layers.litert_layout import LiteRTLayout
from tf_transformer.model import Transformer


@pytest.mark.parametrize("beam_size", [1, 3])
def test_litert_layout_decodes_as_recompute(beam_size):
    config = get_preset("tiny").replace(
        num_layers=2, d_model=16, dff=32, input_vocab_size=30, target_vocab_size=40
    )
    tf.keras.utils.set_random_seed(1)
    model = Transformer.from_config(config)
    model.build()
    src = tf.constant([[2, 5, 6, 7, 8, 3], [2, 9, 3, 0, 0, 0]], tf.int64)
    kwargs = {"max_new_tokens": 6, "beam_size": beam_size, "min_length": 6}
    ours = make_decode_fn(model, step_layout=LiteRTLayout, jit_compile=True, **kwargs)(src)
    reference = make_decode_fn(model, recompute=True, **kwargs)(src)
    np.testing.assert_array_equal(ours.ids.numpy(), reference.ids.numpy())
    np.testing.assert_allclose(ours.scores.numpy(), reference.scores.numpy(), atol=1e-5)
