"""A RoBERTa in JupyterLab, in headless Chromium, offline: a tiny RoBERTa built by transformers in the notebook is
loaded by bertviz_lab.load, and the masking preview masks and predicts at the typed <mask> with RoBERTa's own head,
its controls naming <mask>. Screenshots in the light and dark themes go to screenshots/masking_roberta{,_dark}.png."""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_lab import CONTENT_BOX, SCREENSHOTS, allowed_url, kernel_prints, open_and_run, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 120_000
CELLS = [
    "import torch, transformers\n"
    "import bertviz_lab as bv\n"
    "from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers\n"
    "from bertviz_lab.widgets import MaskingPreview\n"
    "texts = ['The cat sat on the mat because it was warm.', 'A dog barked at the moon.'] * 10\n"
    "bpe = Tokenizer(models.BPE())\n"
    "bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)\n"
    "bpe.decoder = decoders.ByteLevel()\n"
    "bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=['<s>', '<pad>', '</s>', "
    "'<unk>', '<mask>'], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))\n"
    "bpe.add_special_tokens([AddedToken('<mask>', lstrip=True, normalized=False, special=True)])\n"
    "bpe.post_processor = processors.RobertaProcessing(('</s>', 2), ('<s>', 0))\n"
    "hf_tokenizer = transformers.RobertaTokenizerFast(tokenizer_object=bpe)\n"
    "config = transformers.RobertaConfig(vocab_size=len(hf_tokenizer), hidden_size=32, num_hidden_layers=2,\n"
    "                                    num_attention_heads=4, intermediate_size=64, max_position_embeddings=66)\n"
    "torch.manual_seed(0)\n"
    "transformers.RobertaForMaskedLM(config).save_pretrained('tiny-roberta')\n"
    "hf_tokenizer.save_pretrained('tiny-roberta')\n"
    "model, tokenizer = bv.load('tiny-roberta')\n"
    "with torch.no_grad():\n"
    "    model.cls.predictions.bias[tokenizer.convert_tokens_to_ids('Ġmat')] += 60.0\n"
    "preview = MaskingPreview(tokenizer, 'The cat sat on the <mask>.', model=model)\n"
    "preview",
]
VIEW = ".jp-OutputArea-output div.bvl-masking-view"
STATE = ("import json; print(json.dumps({'family': model.config.model_type, 'tokens': "
         "tokenizer.convert_ids_to_tokens(preview.inputs['input_ids'][0].tolist()), "
         "'predicted': [p for p, _ in preview.predictions()], 'first': preview.predictions()[0][1][0][0], "
         "'summary': preview.summary()}))")


def wait_masked(page: Any, masked: str) -> None:
    page.wait_for_function(f"() => [...document.querySelectorAll('{VIEW}')].some("
                           f"(v) => v.offsetParent !== null && v.dataset.masked === {json.dumps(masked)})",
                           timeout=TIMEOUT_MS, polling=100)


def test_a_roberta_masks_and_predicts_at_its_own_mask_token(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    open_and_run(page, lab_server, "masking_roberta.ipynb", CELLS)

    # <s> The Ġcat Ġsat Ġon Ġthe <mask> . </s>: the typed <mask> (position 6) is masked and predicted
    wait_masked(page, "6")
    state = json.loads(kernel_prints(page, STATE))
    assert state["family"] == "roberta" and state["tokens"][6] == "<mask>" and state["tokens"][0] == "<s>"
    assert state["predicted"] == [6] and state["first"] == "Ġmat"
    assert state["summary"] == "1 masked: 1 typed <mask>, 0 clicked of 6 tokens"
    output = page.locator(".jp-OutputArea-output").filter(has=page.locator("div.bvl-masking-view")).first
    assert output.locator(".widget-label", has_text="→ <mask>").count() == 1  # the controls name RoBERTa's token

    output.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "masking_roberta.png"), clip=output.evaluate(CONTENT_BOX))
    set_theme(page, "dark")
    view = page.locator(VIEW).first
    ground = "(el) => getComputedStyle(el.querySelector('svg.bvl-masking .bvl-ground')).fill"
    page.wait_for_function(f"(el) => ({ground})(el) !== 'rgb(255, 255, 255)'", arg=view.element_handle(),
                           timeout=30_000, polling=200)
    page.screenshot(path=str(SCREENSHOTS / "masking_roberta_dark.png"), clip=output.evaluate(CONTENT_BOX))
    set_theme(page, "light")

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
