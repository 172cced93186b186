"""The BERT family from a Hugging Face cache laid out by the test, offline (HF_HUB_OFFLINE=1): bertviz_lab.load,
Model.from_pretrained, Workbench(model="org/name") and %bert_inspect --model open one checkpoint of each family."""

from __future__ import annotations

import pytest
import torch
import transformers
from family_models import FAMILIES, family_hub, hub_name
from hub_cache import offline_cache

import bertviz_lab
from bertviz_lab.magics import BertInspectMagics
from bertviz_lab.model import BERTForMaskedLM
from bertviz_lab.widgets import Workbench
from bertviz_lab.widgets.panels import models as named_models


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The cache and the checkpoint folders it was laid out from."""
    return family_hub(tmp_path_factory.mktemp("family-hub"))


@pytest.fixture(autouse=True)
def forget_named_models():
    """Models loaded by name from this module's temporary cache are not kept for other tests."""
    yield
    named_models._load_once.cache_clear()


@pytest.mark.parametrize("family", FAMILIES)
def test_load_by_repo_id_offline(hub, family, monkeypatch):
    cache, folders = hub
    offline_cache(monkeypatch, cache)
    model, tokenizer = bertviz_lab.load(hub_name(family))
    assert type(model) is BERTForMaskedLM and model.config.model_type == family
    assert model.load_report.missing == [] and model.load_report.unexpected == []
    assert BERTForMaskedLM.from_pretrained(hub_name(family)).config.model_type == family
    reference = transformers.AutoModelForMaskedLM.from_pretrained(str(folders[family])).eval()
    ids = tokenizer(f"A cat sat on the {tokenizer.mask_token}.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert (model(input_ids=ids) - reference(input_ids=ids).logits).abs().max() <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_workbench_by_repo_id_shows_the_attention(hub, family, monkeypatch):
    cache, _ = hub
    offline_cache(monkeypatch, cache)
    text = "The cat sat on the mat."
    bench = Workbench(model=hub_name(family), text=text)
    try:
        tokens = bench.tokenizer.convert_ids_to_tokens(bench.tokenizer(text)["input_ids"])
        panel = bench.attention
        assert bench.model.config.model_type == family
        assert list(panel.layer.options) == [0, 1] and list(panel.head.options) == [0, 1, 2, 3]
        assert panel.trace.tokens[0] == tokens and tokens[0] == bench.tokenizer.cls_token
        assert [tuple(a.shape) for a in panel.attentions] == [(1, 4, len(tokens), len(tokens))] * 2
        assert bench.masking.tokenizer.mask_token == bench.tokenizer.mask_token
    finally:
        bench.close()


class Shell:
    """What the magic reads of an IPython shell: a namespace; run_line_magic as IPython calls it."""

    def __init__(self) -> None:
        self.user_ns: dict = {}
        self.magics = BertInspectMagics(shell=self)

    def run_line_magic(self, name: str, line: str):
        return self.magics.bert_inspect(line)


@pytest.mark.parametrize("family", ["roberta", "distilbert"])
def test_bert_inspect_model_option_opens_a_relative(hub, family, monkeypatch):
    cache, _ = hub
    offline_cache(monkeypatch, cache)
    shell = Shell()
    mask = "<mask>" if family == "roberta" else "[MASK]"
    bench = shell.run_line_magic("bert_inspect", f'--model {hub_name(family)} "The cat sat on the {mask}."')
    try:
        assert isinstance(bench, Workbench) and bench.model.config.model_type == family
        predictions = bench.masking.predictions()
        assert len(predictions) == 1  # the typed mask token, predicted by the family's own MLM head
        position, top = predictions[0]
        assert bench.masking.tokenizer.convert_ids_to_tokens(
            bench.tokenizer(f"The cat sat on the {mask}.")["input_ids"])[position] == mask
        assert len(top) >= 1 and all(0 <= p <= 1 for _, p in top)
        assert f"1 typed {mask}," in bench.masking.summary()  # the panel's words name the model's own token
    finally:
        bench.close()
