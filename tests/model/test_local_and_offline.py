"""Two ways a load meets a user without a network: a training run's checkpoint_dir loads by its path (its newest
checkpoint, as its `latest` file names it), and a Hub name whose host does not resolve is looked up in the cache at
once instead of after huggingface_hub's retries."""

from __future__ import annotations

import pytest
import torch
from hub_cache import online
from huggingface_hub import constants as hub_constants
from tiny_models import tiny_config

import bertviz_lab
from bertviz_lab.model import BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.model import weights as W


@pytest.fixture
def checkpoint_dir(tmp_path, minilm_tokenizer):
    """A folder of two checkpoints, as the Trainer writes them, `latest` naming the second."""
    root = tmp_path / "checkpoints"
    for step, seed in (("step-00000002", 1), ("step-00000004", 2)):
        torch.manual_seed(seed)
        BERTForPreTraining(tiny_config(vocab_size=minilm_tokenizer.vocab_size)).save_pretrained(root / step)
        minilm_tokenizer.save_pretrained(root / step)
    (root / W.LATEST_POINTER).write_text("step-00000004\n", encoding="utf-8")
    return root


def test_a_checkpoint_dir_loads_its_newest_checkpoint(checkpoint_dir):
    model, tokenizer = bertviz_lab.load(checkpoint_dir)
    newest = BERTForPreTraining.from_pretrained(checkpoint_dir / "step-00000004")
    assert type(model) is BERTForPreTraining and isinstance(tokenizer, BERTTokenizerFast)
    for (name, got), (_, expected) in zip(model.state_dict().items(), newest.state_dict().items()):
        assert torch.equal(got, expected), name
    assert torch.equal(BERTForPreTraining.from_pretrained(checkpoint_dir).bert.embeddings.word_embeddings.weight,
                       newest.bert.embeddings.word_embeddings.weight)


@pytest.mark.parametrize("pointer", ["../elsewhere", "/etc", "step-00000009", ""])
def test_a_latest_file_naming_anything_but_one_of_its_folders_is_one_line(checkpoint_dir, pointer):
    (checkpoint_dir / W.LATEST_POINTER).write_text(pointer, encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        bertviz_lab.load(checkpoint_dir)
    message = str(raised.value)
    assert "not a checkpoint folder inside" in message and "\n" not in message


def test_the_trainer_writes_the_pointer_the_loader_reads():
    from bertviz_lab.train import checkpoint

    assert checkpoint.LATEST_FILE == W.LATEST_POINTER


def test_a_hub_host_that_does_not_resolve_sends_the_lookup_to_the_cache_at_once(monkeypatch, tmp_path):
    online(monkeypatch)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(hub_constants, "ENDPOINT", "https://no-such-host.invalid")
    monkeypatch.setattr(W, "_hub_lookup", {})
    asked: list[bool] = []
    real = W.hf_hub_download

    def recording(*args, **kwargs):
        asked.append(kwargs["local_files_only"])
        return real(*args, **kwargs)

    monkeypatch.setattr(W, "hf_hub_download", recording)
    with pytest.raises(W.NotInCacheError, match="the Hub could not be reached to download it"):
        bertviz_lab.load("bert-base-uncased")
    assert asked and all(asked)  # every file looked up in the cache only: no request, no retries
    assert W.hub_unreachable() and "no-such-host.invalid" in W._hub_lookup
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")
    assert not W.hub_unreachable()  # a host that resolves is asked as before
