"""A figure from to_plotly() opened in headless Chromium from file://, offline: written with plotly.js from the
installed package inside the page, it draws its heatmap with no request leaving the page's folder (every other
request is aborted and recorded), and the drawn cells are the panel's weights (plotly's own data on the page)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_config

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]
pytest.importorskip("plotly")

WAIT_MS = 120_000


def test_a_heatmap_from_to_plotly_draws_offline_from_the_packages_plotly_js(chromium, minilm_tokenizer, tmp_path):
    from bertviz_lab.model import BERT
    from bertviz_lab.widgets import AttentionPanel

    torch.manual_seed(0)
    model = BERT(tiny_config(vocab_size=minilm_tokenizer.vocab_size)).eval()
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text="The cat sat on the mat.", layer=1, head=0,
                           view="heatmap")
    page_path = tmp_path / "heatmap.html"
    panel.to_plotly().write_html(str(page_path), include_plotlyjs=True, full_html=True)
    expected = panel.trace.attention(1)[0, 0].numpy()
    panel.close()

    folder = page_path.parent.as_uri() + "/"
    context = chromium.new_context(viewport={"width": 1000, "height": 800})
    requests, aborted = [], []

    def route(intercepted):
        url = intercepted.request.url
        if url.startswith(folder) or url.startswith("data:"):
            intercepted.continue_()
        else:
            aborted.append(url)
            intercepted.abort()

    try:
        context.route("**/*", route)
        context.on("request", lambda request: requests.append(request.url))
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(page_path.as_uri(), wait_until="load")
        page.locator(".js-plotly-plot .main-svg .heatmaplayer image, .js-plotly-plot .heatmaplayer").first.wait_for()
        drawn = page.evaluate("() => Array.from(document.querySelector('.js-plotly-plot')._fullData[0].z, "
                              "(row) => Array.from(row))")  # plotly.js decoded the page's typed arrays
        title = page.evaluate("() => document.querySelector('.js-plotly-plot .gtitle').textContent")
    finally:
        context.close()
    assert aborted == [] and all(url.startswith(folder) or url.startswith("data:") for url in requests), requests
    np.testing.assert_allclose(np.asarray(drawn, dtype=np.float64), expected, atol=1e-7)
    assert title.startswith("layer 1")
