"""Fixtures of the trace tests: a tiny BERT and a padded batch."""

from __future__ import annotations

import pytest
import torch
from trace_testlib import TRACE_SIZES, padded_batch

from bertviz_lab.model import BERT


@pytest.fixture
def tiny_bert(tiny_config) -> BERT:
    """The shared tiny config at the trace sizes, seeded, in eval mode."""
    torch.manual_seed(0)
    return BERT(tiny_config(**TRACE_SIZES)).eval()


@pytest.fixture
def batch():
    return padded_batch()

