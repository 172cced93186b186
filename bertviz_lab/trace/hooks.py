"""HookPoint: a named identity module where forward hooks can watch (or change) a tensor inside the model."""

from __future__ import annotations

import torch
from torch import nn


class HookPoint(nn.Module):
    """Identity module that marks a tensor worth observing; costs one module call when nobody watches."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @property
    def is_watched(self) -> bool:
        """True when a forward or pre-forward hook is registered on this point."""
        return bool(self._forward_hooks or self._forward_pre_hooks)
