import pytest
import tensorflow as tf

from tests.inference.decoding.teacher_forcing import assert_decodes_as_the_model
from tf_transformer.config import get_preset
from tf_transformer.inference.decoding.cached_decode import make_decode_fn
from tf_transformer.layers.attention import MatmulKernels
from tf_transformer.layers.cache_layout import LayerCache
from tf_transformer.model import Transformer

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)


class OneHotLayout(MatmulKernels):
    """A third cache layout, written here only: heads merged `(rows, len, d_model)`, a position
    written by one-hot arithmetic (no scatter), read as `(.., heads, len, depth)` by the plain
    matmul kernels. Nothing else in the package knows it."""

    def __init__(self, num_heads, d_model):
        self.num_heads, self.d_model, self.depth = num_heads, d_model, d_model // num_heads

    def arrange(self, columns):
        return columns

    def memory(self, projected, batch, count):
        return tf.unstack(tf.reshape(projected, (batch, -1, count, self.d_model)), count, axis=2)

    def empty(self, batch, length, dtype):
        zeros = tf.zeros((batch, length, self.d_model), dtype)
        return LayerCache(zeros, zeros)

    def write(self, storage, x, step):
        one_hot = tf.one_hot(step, tf.shape(storage)[1], dtype=x.dtype)  # (len,)
        return storage + one_hot[:, tf.newaxis] * x[:, tf.newaxis, :]

    def read(self, q, keys, values, bias, group):
        def heads(t):  # (batch, len, d_model) -> (batch, 1, heads, len, depth)
            t = tf.reshape(t, (tf.shape(t)[0], 1, -1, self.num_heads, self.depth))
            return tf.transpose(t, (0, 1, 3, 2, 4))

        q = tf.reshape(q, (-1, group, self.num_heads, 1, self.depth))
        return q, heads(keys), heads(values), bias

    def output_kernel(self, table, dtype):
        return None


def assert_decodes_as_recompute(layout, beam_size: int, **options) -> None:
    """A tiny model decoded through `layout` (a CacheLayout class) chooses and scores as the full
    model does (recompute, `teacher_forcing.py`), greedy or every beam; `options` go to
    `make_decode_fn` (e.g. `jit_compile=True`)."""
    config = get_preset("tiny").replace(
        num_layers=2, d_model=16, dff=32, input_vocab_size=30, target_vocab_size=40
    )
    tf.keras.utils.set_random_seed(1)
    model = Transformer.from_config(config)
    model.build()
    src = tf.constant([[2, 5, 6, 7, 8, 3], [2, 9, 3, 0, 0, 0]], tf.int64)
    kwargs = {"max_new_tokens": 6, "beam_size": beam_size, "min_length": 6}
    kwargs["return_all_beams"] = beam_size > 1
    ours = make_decode_fn(model, step_layout=layout, **options, **kwargs)(src)
    assert_decodes_as_the_model(model, src, ours, beam_size=beam_size, min_length=6)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_layout_defined_outside_the_package_decodes_as_recompute(beam_size):
    assert_decodes_as_recompute(OneHotLayout, beam_size)
