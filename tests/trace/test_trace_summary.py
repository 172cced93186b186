"""Trace.summary(): the text table and the HTML table, parameter totals with tied weights once, escaping."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from trace_testlib import TRACE_SIZES, padded_batch

from bertviz_lab.model import BERTForPreTraining
from bertviz_lab.trace import Summary, trace


@pytest.fixture
def pretraining_summary(tiny_config):
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(**TRACE_SIZES)).eval()
    with torch.no_grad(), trace(model, attentions=False) as t:
        model(*padded_batch())
    return model, t


def test_text_table_lists_every_call_with_totals(pretraining_summary):
    model, t = pretraining_summary
    summary = t.summary()
    assert isinstance(summary, Summary) and len(summary.rows) == len(t.calls)
    text = str(summary)
    assert text == repr(summary)
    lines = text.splitlines()
    assert lines[1].split() == ["Module", "Class", "Output", "shape", "Parameters", "Trainable"]
    row = next(line for line in lines if line.strip().startswith("decoder"))
    assert "Linear" in row and "(3,8,100)" in row and "(tied)" in row and f"{100 * 32 + 100:,}" in row
    assert next(line for line in lines if line.strip().startswith("dropout")).rstrip().endswith("-")
    assert summary.total_params == model.num_parameters() and f"Total params: {model.num_parameters():,}" in text
    assert summary.trainable_params == summary.total_params and summary.non_trainable_params == 0
    assert [r.module for r in t.summary(depth=1).rows] == ["BERTForPreTraining", "bert", "cls"]
    with pytest.raises(ValueError, match="depth must be"):
        t.summary(depth=-1)


def test_trainable_column_and_html_table(pretraining_summary):
    model, t = pretraining_summary
    model.bert.embeddings.word_embeddings.requires_grad_(False)
    with torch.no_grad(), trace(model, attentions=False) as frozen:
        model(padded_batch()[0])
    summary = frozen.summary()
    by_name = {r.module: r for r in summary.rows}
    assert by_name["word_embeddings"].trainable == "no" and by_name["embeddings"].trainable == "partial"
    assert by_name["seq_relationship"].trainable == "yes" and by_name["dropout"].trainable == "-"
    assert summary.non_trainable_params == 100 * 32
    html = summary._repr_html_()
    assert html.startswith('<table class="bertviz-summary">') and html.count("<tr>") == len(summary.rows) + 2
    assert "<td" in html and "Non-trainable params: 3,200" in html


def test_html_is_escaped():
    odd = type("Odd<b>&Name", (nn.Module,), {"forward": lambda self, x: x})
    model = nn.Sequential(nn.Linear(2, 2), odd())
    with trace(model) as t:
        model(torch.zeros(1, 2))
    html = t.summary()._repr_html_()
    assert "Odd&lt;b&gt;&amp;Name" in html and "<b>" not in html
    assert "Odd<b>&Name" in str(t.summary())


def test_collapsible_html_folds_every_module_with_submodules(pretraining_summary):
    import xml.etree.ElementTree as ET

    _, t = pretraining_summary
    summary = t.summary()
    root = ET.fromstring(summary.collapsible_html().replace("<br/>", " "))
    rows = [e for e in root.iter() if "bvl-param-row" in (e.get("class") or "")]
    assert len(rows) == len(summary.rows)
    first_cells = [next(e.iter("span")).text for e in rows]
    assert first_cells == [row.module for row in summary.rows]  # every row, in call order
    groups = list(root.iter("details"))
    parents = [row for i, row in enumerate(summary.rows[:-1]) if summary.rows[i + 1].depth > row.depth]
    assert len(groups) == len(parents) - 1  # all but the model's own row, which stays visible
    assert not [g for g in groups if "open" in g.attrib]
    opened = ET.fromstring(summary.collapsible_html(open_depth=2).replace("<br/>", " "))
    assert {g.get("data-depth") for g in opened.iter("details") if "open" in g.attrib} == {"1"}
    assert "Total params" in summary.collapsible_html()
