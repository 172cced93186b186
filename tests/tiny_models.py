"""The tests' one tiny BERT config: BERTConfig.tiny() cut down so a forward pass takes milliseconds on a busy CPU."""

from __future__ import annotations

from typing import Any

from bertviz_lab.model import BERTConfig

# 2 layers of 4 heads of 16, 100 tokens, 32 positions; every size BERTConfig.tiny() sets is overridden here.
TINY_SIZES: dict[str, Any] = dict(vocab_size=100, hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                  intermediate_size=128, max_position_embeddings=32)


def tiny_fields(**overrides: Any) -> dict[str, Any]:
    """The tiny config as keyword arguments, so a transformers.BertConfig twin gets exactly the same sizes."""
    return {**TINY_SIZES, **overrides}


def tiny_config(**overrides: Any) -> BERTConfig:
    """BERTConfig.tiny() at the tests' sizes; a test passes what it needs (vocab, heads, dropout) as overrides."""
    return BERTConfig.tiny(**tiny_fields(**overrides))
