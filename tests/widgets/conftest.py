"""Fixtures of the widget tests: tiny random BERTs over the MiniLM vocabulary (`minilm_tokenizer`, tests/conftest.py),
and a tokenizer whose vocabulary holds an HTML-injection token (`xss_tokenizer`)."""

from __future__ import annotations

import pytest
import torch
from tokenizers import AddedToken
from widgets_testlib import XSS, tiny_config

from bertviz_lab.model import (
    BERT,
    BERTForMaskedLM,
    BERTForPreTraining,
    BERTTokenizerFast,
)


@pytest.fixture(scope="session")
def pretraining_model(minilm_tokenizer) -> BERTForPreTraining:
    """3 layers x 4 heads, 128 wide, random weights, no dropout."""
    torch.manual_seed(0)
    return BERTForPreTraining(tiny_config(minilm_tokenizer.vocab_size)).eval()


@pytest.fixture(scope="session")
def mlm_model(minilm_tokenizer) -> BERTForMaskedLM:
    torch.manual_seed(1)
    return BERTForMaskedLM(tiny_config(minilm_tokenizer.vocab_size)).eval()


@pytest.fixture(scope="session")
def backbone(minilm_tokenizer) -> BERT:
    """A BERT without any head (no MLM predictions)."""
    torch.manual_seed(2)
    return BERT(tiny_config(minilm_tokenizer.vocab_size)).eval()


@pytest.fixture(scope="session")
def xss_tokenizer(tmp_path_factory) -> BERTTokenizerFast:
    """A 20-word vocabulary whose entries include `<img src=x onerror=alert(1)>`, `"` and `&`, kept whole in text."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "it", "was",
             "warm", '"', "&", "dog", "ran", "home", XSS]
    vocab = tmp_path_factory.mktemp("xss_vocab") / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
    tokenizer = BERTTokenizerFast(vocab_file=vocab)
    # the BERT pre-tokenizer would split the string at its punctuation: register it as one (non-special) token
    tokenizer.backend_tokenizer.add_tokens([AddedToken(XSS, normalized=False)])
    assert tokenizer.tokenize(f"the {XSS} cat") == ["the", XSS, "cat"]
    return tokenizer


@pytest.fixture(scope="session")
def xss_model(xss_tokenizer) -> BERTForMaskedLM:
    """A tiny masked LM over the XSS vocabulary that predicts the XSS token first everywhere."""
    torch.manual_seed(3)
    model = BERTForMaskedLM(tiny_config(xss_tokenizer.vocab_size, hidden_size=32, num_attention_heads=2,
                                            intermediate_size=64, hidden_dropout_prob=0.0,
                                            attention_probs_dropout_prob=0.0)).eval()
    with torch.no_grad():
        model.cls.predictions.decoder.bias[xss_tokenizer.convert_tokens_to_ids(XSS)] += 50.0
    return model
