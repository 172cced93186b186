"""Key/value caches for incremental decoding with a BERT decoder (self-attention and cross-attention)."""

from __future__ import annotations

import torch

from bertviz_lab.model.config import BERTConfig


class DynamicCache:
    """Grows by concatenation: one (keys, values) pair per layer, shape (B, nh, T_past, hs)."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def __len__(self) -> int:
        return len(self.keys)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Number of cached positions (0 before the first step)."""
        return self.keys[layer_idx].shape[-2] if layer_idx < len(self.keys) else 0

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int,
               cache_position: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's keys and values; return everything cached for the layer."""
        if layer_idx == len(self.keys):
            self.keys.append(key)
            self.values.append(value)
        elif layer_idx < len(self.keys):
            self.keys[layer_idx] = torch.cat([self.keys[layer_idx], key], dim=-2)
            self.values[layer_idx] = torch.cat([self.values[layer_idx], value], dim=-2)
        else:
            raise ValueError(f"DynamicCache.update got layer {layer_idx} before layer {len(self.keys)} was filled.")
        return self.keys[layer_idx], self.values[layer_idx]


class StaticCache:
    """Pre-allocated (B, nh, max_cache_len, hs) buffers written at `cache_position`; fixed shapes suit torch.compile."""

    def __init__(self, num_layers: int, batch_size: int, num_heads: int, head_size: int, max_cache_len: int,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> None:
        shape = (batch_size, num_heads, max_cache_len, head_size)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(num_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(num_layers)]
        self.max_cache_len = max_cache_len
        self._seen = 0

    @classmethod
    def for_config(cls, config: BERTConfig, batch_size: int, max_cache_len: int,
                   device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> StaticCache:
        """A cache sized for every layer of a model with `config`."""
        return cls(config.num_hidden_layers, batch_size, config.num_attention_heads, config.head_size,
                   max_cache_len, device=device, dtype=dtype)

    def __len__(self) -> int:
        return len(self.keys)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Number of positions written so far."""
        return self._seen

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int,
               cache_position: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step at `cache_position`; return the whole buffers (unwritten slots are masked by the model)."""
        if cache_position is None:
            raise ValueError("StaticCache.update needs cache_position: the slots to write.")
        end = int(cache_position[-1]) + 1
        if end > self.max_cache_len:
            raise ValueError(f"StaticCache holds {self.max_cache_len} positions; position {end - 1} does not fit.")
        self.keys[layer_idx].index_copy_(2, cache_position, key.to(self.keys[layer_idx].dtype))
        self.values[layer_idx].index_copy_(2, cache_position, value.to(self.values[layer_idx].dtype))
        if layer_idx == len(self.keys) - 1:
            self._seen = max(self._seen, end)
        return self.keys[layer_idx], self.values[layer_idx]


class EncoderDecoderCache:
    """A self-attention cache plus the cross-attention keys/values, which are computed once per encoder output."""

    def __init__(self, self_attention_cache: DynamicCache | StaticCache | None = None) -> None:
        self.self_attention_cache = self_attention_cache if self_attention_cache is not None else DynamicCache()
        self.cross_keys: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.self_attention_cache)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Number of decoder positions cached."""
        return self.self_attention_cache.get_seq_length(layer_idx)

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int,
               cache_position: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Self-attention update, delegated."""
        return self.self_attention_cache.update(key, value, layer_idx, cache_position)

    def cross_attention(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Cached cross-attention keys/values for a layer, if already computed."""
        return self.cross_keys.get(layer_idx)

    def set_cross_attention(self, layer_idx: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Remember the cross-attention keys/values of a layer."""
        self.cross_keys[layer_idx] = (key, value)


Cache = DynamicCache | StaticCache | EncoderDecoderCache
