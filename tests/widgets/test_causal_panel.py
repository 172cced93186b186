"""The Causal tab: its tools come from the registry and are made when first shown, each holds the tab's model and
texts when it is shown, a patching cell opens its layer (and head) in an attention panel of the same model and text,
the model row switches every tool to another model, and `%bert_inspect --view causal` opens it."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.trace import logit_lens, patch
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.causal import CausalPanel
from bertviz_lab.widgets.panels.workbench import TABS, Workbench

CLEAN, CORRUPTED = "The capital of France is [MASK].", "The capital of Italy is [MASK]."


def test_the_switcher_offers_the_registrys_causal_tools_and_each_is_made_when_first_shown(mlm_model,
                                                                                          minilm_tokenizer):
    panel = CausalPanel(mlm_model, minilm_tokenizer, CLEAN, CORRUPTED)
    tools = registry.views(registry.CAUSAL)
    assert panel.tool.options == tuple((v.label, v.name) for v in tools)
    assert [v.name for v in tools] == [registry.PATCHING, registry.LOGIT_LENS, registry.FFN_NEURONS]
    assert list(panel.tools) == [registry.PATCHING] and panel.on_screen is panel.patching
    for view in tools:
        panel.tool.value = view.name
        assert panel.on_screen is getattr(panel, view.attribute) is panel.tools[view.name]
        assert panel.to_svg() == panel.on_screen.to_svg() and panel.to_svg().startswith("<svg")
    with pytest.raises(ValueError, match="tool must be one of 'patching', 'logit lens', 'ffn neurons'"):
        CausalPanel(mlm_model, minilm_tokenizer, tool="saliency")


def test_new_texts_reach_each_tool_when_it_is_shown(mlm_model, minilm_tokenizer):
    panel = CausalPanel(mlm_model, minilm_tokenizer, CLEAN, CORRUPTED, tool=registry.LOGIT_LENS)
    clean, corrupted = "The capital of Spain is [MASK].", "The capital of Japan is [MASK]."
    panel.clean_box.value, panel.corrupted_box.value = clean, corrupted  # Enter in each box
    batch = minilm_tokenizer([clean], return_tensors="pt")
    assert torch.equal(panel.logit_lens.lens.logits, logit_lens(mlm_model, batch).logits)
    assert registry.PATCHING not in panel.tools  # never shown: never made
    panel.tool.value = registry.PATCHING
    result = panel.patching.result
    assert panel.patching.result.effect.shape == (mlm_model.config.num_hidden_layers, batch["input_ids"].shape[1])
    mask = batch["input_ids"][0].tolist().index(minilm_tokenizer.mask_token_id)
    target, foil = (minilm_tokenizer.convert_tokens_to_ids(t) for t in (panel.patching.target, panel.patching.foil))
    expected = patch(mlm_model, batch, minilm_tokenizer([corrupted], return_tensors="pt"),
                     lambda logits: logits[0, mask, target] - logits[0, mask, foil])
    assert torch.allclose(result.effect, expected.effect, atol=1e-6)
    panel.set_texts(CLEAN, CORRUPTED)  # the boxes follow, without running twice
    assert (panel.clean_box.value, panel.corrupted_box.value) == (CLEAN, CORRUPTED)
    panel.tool.value = registry.LOGIT_LENS
    assert torch.equal(panel.logit_lens.lens.logits,
                       logit_lens(mlm_model, minilm_tokenizer([CLEAN], return_tensors="pt")).logits)


def test_a_patching_cell_opens_its_layer_and_head_in_an_attention_panel_of_the_clean_text(mlm_model,
                                                                                          minilm_tokenizer):
    panel = CausalPanel(mlm_model, minilm_tokenizer, CLEAN, CORRUPTED)
    assert panel.attention is None
    panel.patching.view.open_cell(2, 4)  # layer 2, token 4 of the layer × token map
    attention = panel.attention
    assert attention is not None and attention.text == CLEAN and panel.attention_slot.children == (attention,)
    assert (attention.layer.value, attention.aggregation.value) == (2, "mean")
    panel.patching.set(point="head_out")
    panel.patching.view.open_cell(1, 3)  # layer 1, head 3 of the layer × head grid
    assert panel.attention is attention  # the same text: the same panel, moved
    assert (attention.layer.value, attention.head.value, attention.aggregation.value) == (1, 3, "head")
    assert "layer 1 · head 3" in attention.heatmap.title


def test_the_model_row_switches_every_tool_and_a_model_without_an_mlm_head_is_one_line(mlm_model, backbone,
                                                                                       minilm_tokenizer):
    panel = CausalPanel(backbone, minilm_tokenizer, CLEAN, CORRUPTED)
    assert "needs a masked-LM head" in panel.patching.view.message and not panel.patching.view.svg
    panel.tool.value = registry.FFN_NEURONS  # needs no head
    assert panel.ffn_neurons.text_view.svg and not panel.ffn_neurons.text_view.message

    class Trainer:  # what the Training tab hands over: a model being trained and its tokenizer
        model, tokenizer = mlm_model, minilm_tokenizer

    panel.offer_model_from(lambda: Trainer)
    assert ("the Training tab's model", "training") in panel.model_row.choice.options
    panel.model_row.choice.value = "training"
    assert panel.model_row.message.value == "" and panel.model is not mlm_model  # a copy: training goes on
    assert all(torch.equal(a, b) for a, b in zip(panel.model.state_dict().values(), mlm_model.state_dict().values()))
    assert panel.ffn_neurons.model is panel.model
    panel.tool.value = registry.PATCHING
    assert panel.patching.view.svg and not panel.patching.view.message
    panel.model_row.choice.value = "current"
    assert panel.model is backbone and "needs a masked-LM head" in panel.patching.view.message


def test_the_workbench_makes_its_causal_tool_when_the_tab_is_first_opened(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, "The cat sat on the mat.")
    assert bench.causal.tools == {} and "Open the Causal tab" in bench.causal.static_html()
    assert bench.causal.children == ()  # not even its controls reach the page before the tab is opened
    bench.tabs.selected_index = TABS.index("causal")
    assert list(bench.causal.tools) == [registry.PATCHING] and bench.causal.patching.result is not None
    assert ("the Training tab's model", "training") in bench.causal.model_row.choice.options


def test_the_static_copy_names_the_texts_escaped(mlm_model, minilm_tokenizer):
    hostile = 'The <img src=x onerror="alert(1)"> is [MASK].'
    panel = CausalPanel(mlm_model, minilm_tokenizer, hostile, CORRUPTED, tool=registry.LOGIT_LENS)
    html = panel.static_html()
    assert "<img" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert panel.on_screen.to_svg() in html


def test_the_ffn_neurons_list_a_corpus_analysed_with_neuron_maxima_and_open_its_texts(mlm_model, minilm_tokenizer,
                                                                                      tmp_path):
    from bertviz_lab.corpus import analyze

    texts = ["The river bank was muddy.", "She paid at the bank.", "A capital idea.", "Paris is the capital.",
             "The cat sat on the mat."]
    corpus = analyze(mlm_model, minilm_tokenizer, texts, tmp_path / "corpus", neurons=3, progress=False)
    panel = CausalPanel(mlm_model, minilm_tokenizer, CLEAN, CORRUPTED, tool=registry.FFN_NEURONS, corpus=corpus)
    neurons = panel.ffn_neurons
    neurons.set(layer=1, neuron=7)
    listed = corpus.top_neuron_texts(1, 7, k=3)
    assert corpus.neurons_kept == 3 and neurons.corpus_view.svg and not neurons.corpus_view.message  # 3 of 5 asked
    assert neurons.corpus_view.svg.count('class="bvl-cell') == len(listed) == 3
    neurons.corpus_view.open_cell(0, 0)  # the text where neuron 7 of layer 1 fires most becomes the clean text
    first = texts[int(listed["text_id"].iloc[0])]
    assert panel.clean == first and panel.clean_box.value == first and neurons.text == first
    assert (neurons.layer.value, neurons.chosen_neuron, neurons.position.value) == (
        1, 7, int(listed["position"].iloc[0]))
    assert float(neurons.activations[1, int(listed["position"].iloc[0]), 7]) == pytest.approx(
        float(listed["activation"].iloc[0]), abs=1e-5)


def test_a_clean_text_alone_runs_the_lens_and_asks_patching_for_a_corrupted_one(mlm_model, minilm_tokenizer):
    clean = "The capital of Spain is [MASK]."
    panel = CausalPanel(mlm_model, minilm_tokenizer, clean=clean, corrupted=None)  # as %bert_inspect opens it
    assert panel.corrupted_box.value == "" and panel.patching.view.svg == ""
    assert panel.patching.view.message.startswith("no corrupted text yet: give the clean text with one fact changed")
    panel.tool.value = registry.LOGIT_LENS
    assert panel.logit_lens.view.svg and not panel.logit_lens.view.message
    panel.tool.value = registry.PATCHING
    panel.corrupted_box.value = "The capital of Japan is [MASK]."  # Enter in the box: patching runs
    assert panel.patching.view.svg and panel.patching.result is not None
