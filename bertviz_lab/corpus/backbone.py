"""The encoder the corpus runs: heads (MLM, NSP, classifiers) are not needed for attention or hidden states."""

from __future__ import annotations

from typing import cast

from torch import nn

from bertviz_lab.model.config import BERTConfig


def backbone_of(model: nn.Module) -> nn.Module:
    """The encoder a head model wraps (`model.bert`), or the model itself."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. from bertviz_lab.load_default()), "
                        f"got {type(model).__name__}.")
    inner = getattr(model, "bert", None)
    return inner if isinstance(inner, nn.Module) else model


def config_of(backbone: nn.Module) -> BERTConfig:
    """The backbone's `config`: the corpus reads its sizes (layers, heads, positions) from it."""
    # nn.Module types its attributes as Tensor | Module; the backbones analyze runs (bertviz_lab.load) carry a
    # BERTConfig, which mypy cannot see through the attribute.
    return cast(BERTConfig, backbone.config)
