"""Shared by every test: one torch thread per test (tiny models are fastest that way, and the 2-core CI is shared)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Run each test on one thread, then restore the setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
