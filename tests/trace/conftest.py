"""Fixtures of the trace tests: a tiny BERT and a padded batch."""

from __future__ import annotations

import pytest
import torch
from trace_testlib import padded_batch, tiny_config

from bertviz_lab.model import BERT


@pytest.fixture
def tiny_bert() -> BERT:
    torch.manual_seed(0)
    return BERT(tiny_config()).eval()


@pytest.fixture
def batch():
    return padded_batch()

