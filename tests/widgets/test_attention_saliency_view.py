"""The attention panel's saliency view: the SaliencyPanel, made only when first shown, following the panel's text and
a Workbench's runs; without a model it says what it needs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import torch

from bertviz_lab.trace import saliency, trace
from bertviz_lab.widgets import AttentionPanel, Workbench
from bertviz_lab.widgets.panels.saliency import SaliencyPanel


def test_saliency_is_made_when_first_shown_and_follows_the_text(pretraining_model, minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat on the [MASK].")
    assert panel.saliency is None  # nothing computed for a view not shown
    panel.view.value = "saliency"
    embedded = panel.saliency
    assert isinstance(embedded, SaliencyPanel) and panel.on_screen is embedded
    assert panel.slots["saliency"].children == (embedded,)
    assert embedded.tokens == panel.trace.tokens[0]
    expected = saliency(pretraining_model, embedded.encoded.encoding, embedded.target, tokenizer=minilm_tokenizer)[0]
    np.testing.assert_allclose(embedded.scores, expected.numpy(), atol=1e-6)
    # its own toolbar and export button; the attention panel's toolbar row stays empty
    assert panel.toolbar.children[0].children == () and panel.export_bar not in panel.toolbar.children
    assert panel.to_svg() == embedded.to_svg() == embedded.view.svg and embedded.to_svg() in panel.static_html()
    ET.fromstring(panel.to_svg())
    changes = []
    panel.on_figure_changed(lambda: changes.append(1))
    panel.set_text("Dogs [MASK] loudly.")
    assert panel.saliency is embedded and embedded.tokens == ["[CLS]", "dogs", "[MASK]", "loudly", ".", "[SEP]"]
    assert changes
    # off screen it waits: a new text is handed over when the view is shown again
    panel.view.value = "heatmap"
    panel.set_text("Birds sing.")
    assert embedded.text == "Dogs [MASK] loudly."
    panel.view.value = "saliency"
    assert embedded.text == "Birds sing." and embedded.tokens[1:3] == ["birds", "sing"]


def test_the_workbench_saliency_view_follows_its_text(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, text="A [MASK] cat.")
    bench.attention.view.value = "saliency"
    bench.text_box.value, bench.text_b_box.value = "One dog.", "It ran."
    bench.run()
    assert bench.attention.saliency.tokens == ["[CLS]", "one", "dog", ".", "[SEP]", "it", "ran", ".", "[SEP]"]
    assert bench.attention.saliency.text_b == "It ran."


def test_a_panel_without_its_model_says_what_saliency_needs(pretraining_model):
    with torch.inference_mode(), trace(pretraining_model) as recorded:
        pretraining_model(torch.tensor([[101, 2000, 2001, 102]]))
    panel = AttentionPanel(recorded, view="saliency")
    assert panel.saliency is None and "needs the model and the text" in panel.saliency_note.value
    assert "needs the model and the text" in "".join(ET.fromstring(panel.to_svg()).itertext())
