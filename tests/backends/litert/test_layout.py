"""`LiteRTLayout` (the LiteRT export's step) decodes as recompute under XLA, where TensorFlow
runs its dynamic update slice; tests/backends/litert/test_litert.py checks the converted step."""

import pytest

from tests.layers.test_cache_layout import assert_decodes_as_recompute
from tf_transformer.backends.litert.layout import LiteRTLayout

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_litert_layout_decodes_as_recompute(beam_size):
    assert_decodes_as_recompute(LiteRTLayout, beam_size, jit_compile=True)
