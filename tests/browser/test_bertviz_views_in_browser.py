"""bertviz's calls in JupyterLab, in headless Chromium, offline: head_view on a tiny random GPT-2's attention,
model_view and heatmap on a tiny random BART's encoder, decoder and cross attention. Each draws; a change of
attention, layer or head made in the page redraws it (its title names the new choice); after a page reload a change
still works and reaches the static copy the saved notebook keeps; the export button writes an SVG. Screenshots of
the three views go to screenshots/bertviz_*.png (light and dark)."""

from __future__ import annotations

from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    MODEL_STATIC_COPIES,
    SCREENSHOTS,
    allowed_url,
    copy_to_readme,
    open_and_run,
    reload_notebook,
    save_notebook,
    saved_static_copies,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]
TIMEOUT_MS = 120_000

CELLS = [
    "import torch, transformers\n"
    "from bertviz_lab import views\n"
    "torch.manual_seed(0)\n"
    "gpt2 = transformers.GPT2Model(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=100,\n"
    "    bos_token_id=0, eos_token_id=0, attn_implementation='eager')).eval()\n"
    "tokens = ['The', 'Ġcat', 'Ġsat', 'Ġon', 'Ġthe', 'Ġmat']\n"
    "with torch.no_grad():\n"
    "    attention = gpt2(torch.arange(3, 9)[None], output_attentions=True).attentions\n"
    "bart = transformers.BartModel(transformers.BartConfig(\n"
    "    vocab_size=100, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,\n"
    "    decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32, init_std=1.0,\n"
    "    attn_implementation='eager')).eval()\n"
    "with torch.no_grad():\n"
    "    out = bart(input_ids=torch.arange(4, 11)[None], decoder_input_ids=torch.arange(20, 24)[None],\n"
    "               output_attentions=True)\n"
    "seq2seq = dict(encoder_attention=out.encoder_attentions, decoder_attention=out.decoder_attentions,\n"
    "               cross_attention=out.cross_attentions,\n"
    "               encoder_tokens=['▁The', '▁cat', 's', '▁sat', '▁down', '</s>', '<pad>'],\n"
    "               decoder_tokens=['<pad>', '▁Die', '▁Katze', 'n'])",
    "views.head_view(attention, tokens)",
    "views.model_view(**seq2seq)",
    "views.heatmap(**seq2seq)",
]
VIEWS = ("head_view", "model_view", "heatmap")

# The live figure's title as drawn (the svg's .bvl-title), in the panel's own view, not the static copy.
TITLE = """(panel) => {
  const title = panel.querySelector('.bvl-view svg .bvl-title, .bvl-heatmap-view svg .bvl-title');
  return title ? title.textContent : '';
}"""


def panels(page: Any) -> dict[str, Any]:
    """The three live panels, in the order of the cells."""
    found = page.locator(".jp-OutputArea-output .bvl-panel")
    return {name: found.nth(index) for index, name in enumerate(VIEWS)}


def shows(page: Any, panel: Any, title: str) -> str:
    """Wait until the panel's live figure has exactly this title; return it."""
    page.wait_for_function(f"([panel, title]) => ({TITLE})(panel) === title", arg=[panel.element_handle(), title],
                           timeout=TIMEOUT_MS, polling=200)
    return panel.evaluate(TITLE)


def choose(panel: Any, label: str, option: str) -> None:
    panel.locator(f".widget-dropdown:has(label:text-is('{label}')) select").first.select_option(label=option)


def photograph(page: Any, found: dict[str, Any], theme: str) -> list:
    pictures = []
    for name, panel in found.items():
        panel.scroll_into_view_if_needed()
        path = SCREENSHOTS / f"bertviz_{name}_{theme}.png"
        page.screenshot(path=str(path), clip=panel.evaluate(CONTENT_BOX))
        pictures.append(path)
    return pictures


def test_bertviz_calls_draw_change_survive_a_reload_and_export(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    opened = open_and_run(page, lab_server, "bertviz_views.ipynb", CELLS)
    found = panels(page)
    head, model, heat = found["head_view"], found["model_view"], found["heatmap"]
    SCREENSHOTS.mkdir(exist_ok=True)

    # each call drew its view
    shows(page, head, "layer 0 · heads 0, 1")
    shows(page, model, "encoder attention · 2 layers × 2 heads · 7 × 7 tokens · one colour scale")
    shows(page, heat, "encoder attention · layer 0 · head 0")

    # changes made in the page: the attention kind, the layer, the head, a head chip
    choose(heat, "attention", "cross")
    shows(page, heat, "cross attention · layer 0 · head 0")
    choose(heat, "layer", "1")
    choose(heat, "head", "1")
    shows(page, heat, "cross attention · layer 1 · head 1")
    assert heat.locator(".bvl-heatmap-view").get_attribute("data-rows") == "4"  # decoder queries
    assert heat.locator(".bvl-heatmap-view").get_attribute("data-cols") == "7"  # encoder keys
    choose(model, "attention", "cross")
    shows(page, model, "cross attention · 2 layers × 2 heads · 4 × 7 tokens · one colour scale")
    choose(head, "layer", "1")
    shows(page, head, "layer 1 · heads 0, 1")
    head.locator("g.bvl-head-chip[data-head='0']").click()
    shows(page, head, "layer 1 · head 1")
    pictures = photograph(page, found, "light")
    set_theme(page, "dark")
    pictures += photograph(page, found, "dark")
    set_theme(page, "light")

    # after a reload: the views come back as they were, and a change made there reaches the saved static copy
    save_notebook(page)
    reload_notebook(page, opened.path, TIMEOUT_MS)
    found = panels(page)
    head, model, heat = found["head_view"], found["model_view"], found["heatmap"]
    shows(page, heat, "cross attention · layer 1 · head 1")
    shows(page, head, "layer 1 · head 1")
    choose(heat, "layer", "0")
    after = shows(page, heat, "cross attention · layer 0 · head 1")
    page.wait_for_function(f"(title) => ({MODEL_STATIC_COPIES})().some((html) => html.includes(title))", arg=after,
                           timeout=TIMEOUT_MS, polling=250)
    save_notebook(page)
    copies = saved_static_copies(lab_server.root / opened.path)
    assert len(copies) == 3 and after in copies[2], [c[:300] for c in copies]

    # the export button writes the figure on screen as SVG next to the notebook
    heat.locator("button", has_text="export").click()
    status = heat.locator(".bvl-export-status")
    status.wait_for(timeout=TIMEOUT_MS)
    assert "saved" in status.text_content(), status.text_content()
    exported = sorted((lab_server.root / "notebooks" / "bertviz_figures").glob("cross-layer0-head1-*.svg"))
    assert exported, status.text_content()
    assert after in exported[-1].read_text()

    copy_to_readme(pictures)
    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
