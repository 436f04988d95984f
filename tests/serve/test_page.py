"""The page in a real browser: headless Chromium types a sentence and sees its translation,
its alternatives and (a run directory) its attention map."""

import pytest

from tests.serve.browser import MISSING, use_page
from tests.serve.running import running
from tests.serve.test_server import SENTENCES, translator

pytestmark = [
    pytest.mark.slow,
    pytest.mark.cost(20),
    pytest.mark.skipif(MISSING is not None, reason=str(MISSING)),
]


def test_the_page_translates_and_shows_alternatives(tmp_path):
    model = translator()
    screenshot = tmp_path / "page.png"
    with running(model) as (url, _):
        shown = use_page(url, SENTENCES[0], screenshot, alternatives=2)
    best = model.translate_n_best(SENTENCES[:1], 3)[0]
    assert shown["error"] == ""
    assert shown["model"] == model.description
    assert shown["translation"] == best[0]
    assert len(best) > 1 and shown["alternatives"] == best[1:]
    _, source, target = model.attention(SENTENCES[0])
    assert shown["attention"] == f"{len(target)}x{len(source)}"  # drawn: a cell per wordpiece
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
